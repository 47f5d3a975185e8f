"""Kafka's rate and throttle arithmetic for quotas, and which quota a client gets:
figures worked out from Kafka's Rate.windowSize, SampledStat and QuotaUtils, the eight
levels of precedence of ClientQuotaManager, and how the throttled rate behaves over
time under Kafka's default windows (a client that always has more to send)."""

from __future__ import annotations

import pytest

from epochlog.quotas.entities import DEFAULT, QuotaEntity
from epochlog.quotas.manager import ClientQuotaManager
from epochlog.quotas.rate import WindowedRate, throttle_time_ms


def test_a_new_rate_counts_the_windows_before_it_as_quiet() -> None:
    rate = WindowedRate(samples=11, window_ms=1000)
    rate.record(5000, now_ms=100_000)
    # Nothing elapsed yet: taken over the 10 earlier whole windows (Rate.windowSize).
    assert rate.window_ms(100_000) == 10_000
    assert rate.measure(100_000) == pytest.approx(500.0)
    rate.record(5000, now_ms=100_500)
    assert rate.window_ms(100_500) == 10_500
    assert rate.measure(100_500) == pytest.approx(10_000 / 10.5)


def test_samples_roll_over_and_old_ones_expire() -> None:
    rate = WindowedRate(samples=3, window_ms=1000)
    for second in range(6):
        rate.record(100, now_ms=second * 1000)
    # Four samples are kept (the configured three and one overlapping the start), those
    # of seconds 2..5; second 2's is samples * window old, so it is reset: the rate is
    # seconds 3..5's 300 over the 2000 ms since second 3 began.
    assert rate.window_ms(5000) == 2000
    assert rate.measure(5000) == pytest.approx(150.0)
    # A sample whose last value is samples * window old is reset.
    assert rate.measure(9000) == pytest.approx(0.0)


def test_throttle_time_brings_the_rate_back_to_the_bound() -> None:
    # X = (O - T) / T * W, rounded as Java's Math.round (half up).
    assert throttle_time_ms(2000.0, 1000.0, 10_000) == 10_000
    assert throttle_time_ms(1000.25, 1000.0, 2) == 0
    assert throttle_time_ms(1250.0, 1000.0, 10) == 3  # 2.5 rounds up


def _manager(**limits: float) -> ClientQuotaManager:
    manager = ClientQuotaManager("producer_byte_rate", samples=11, window_seconds=1)
    entities = {
        "user_client": QuotaEntity("alice", "app"),
        "user_default_client": QuotaEntity("alice", DEFAULT),
        "user": QuotaEntity("alice"),
        "default_user_client": QuotaEntity(DEFAULT, "app"),
        "default_user_default_client": QuotaEntity(DEFAULT, DEFAULT),
        "default_user": QuotaEntity(DEFAULT),
        "client": QuotaEntity(client_id="app"),
        "default_client": QuotaEntity(client_id=DEFAULT),
    }
    for name, value in limits.items():
        manager.set_limit(entities[name], value)
    return manager


LEVELS = [
    "user_client",
    "user_default_client",
    "user",
    "default_user_client",
    "default_user_default_client",
    "default_user",
    "client",
    "default_client",
]


@pytest.mark.parametrize("level", range(len(LEVELS)))
def test_the_most_specific_quota_applies(level: int) -> None:
    # Every level from this one down is set, each to its own value: this one wins.
    manager = _manager(**{name: 1000.0 * (i + 1) for i, name in enumerate(LEVELS) if i >= level})
    _, limit = manager.resolve("alice", "app")
    assert limit == 1000.0 * (level + 1)


def test_who_shares_a_quota() -> None:
    # A user quota: all the user's clients are one rate; a client-id quota: one rate for
    # the client id whoever the user; a (user, client) default: one rate per pair.
    assert _manager(user=1.0).resolve("alice", "app")[0] == ("alice", "")
    assert _manager(client=1.0).resolve("bob", "app")[0] == ("", "app")
    both = _manager(user=1.0, default_user_default_client=2.0)
    assert both.resolve("carol", "x") == (("carol", "x"), 2.0)
    assert both.resolve("alice", "x") == (("alice", ""), 1.0)
    assert _manager(client=1.0).resolve("bob", "other") == (("", "other"), None)


def test_a_client_over_its_quota_is_throttled_and_an_unlimited_one_never() -> None:
    manager = _manager(client=1000.0)
    # The first window's worth of bursts (10 windows of 1000 B) passes...
    assert manager.record("u", "app", 10_000, now_ms=0) == 0
    # ...then a client over it waits until its rate is back at the quota.
    assert manager.record("u", "app", 1000, now_ms=0) == 1000
    assert manager.record("u", "other", 10**9, now_ms=0) == 0
    assert manager.max_value_in_window("u", "app") == 10_000
    assert manager.max_value_in_window("u", "other") == float("inf")


def test_request_throttles_are_bounded_by_one_window() -> None:
    manager = ClientQuotaManager("request_percentage", 11, 1, max_throttle_ms=1000)
    manager.set_limit(QuotaEntity(client_id="app"), 1.0)
    assert manager.record("u", "app", 10_000.0, now_ms=0) == 1000


def _always_sending(samples: int, request_bytes: int, seconds: int) -> list[tuple[int, int]]:
    """A producer that always has more: each request is read as soon as the connection
    is unmuted, 2 ms after the last (the broker's time with it)."""
    manager = ClientQuotaManager("producer_byte_rate", samples, 1)
    manager.set_limit(QuotaEntity(client_id="app"), 1_000_000.0)
    now, accepted = 0, []
    while now < seconds * 1000:
        throttle = manager.record("u", "app", request_bytes, now)
        accepted.append((now, request_bytes))
        now += throttle + 2
    return accepted


def _rate(accepted: list[tuple[int, int]], start_s: int, end_s: int) -> float:
    total = sum(n for t, n in accepted if start_s * 1000 <= t < end_s * 1000)
    return total / (end_s - start_s)


def test_kafkas_default_windows_hold_a_client_to_its_quota_over_time() -> None:
    # quota.window.num=11, 1 s windows: the first ten windows' worth passes at once, and
    # each time that burst's sample expires another follows (every ~11 s), so the rate
    # is the quota over whole minutes, not over a few seconds.
    accepted = _always_sending(11, 65536, 400)
    assert _rate(accepted, 0, 1) > 9_000_000
    for start in (0, 100, 200, 300):
        assert _rate(accepted, start, start + 100) == pytest.approx(1_000_000, rel=0.02)


def test_two_windows_hold_a_client_to_its_quota_within_seconds() -> None:
    accepted = _always_sending(2, 65536, 120)
    for start in range(4, 100, 5):
        assert _rate(accepted, start, start + 20) == pytest.approx(1_000_000, rel=0.05)
