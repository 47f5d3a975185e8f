"""A follower told of a new leader epoch or a new partition before its leader was (each
learns it at its own metastore poll) asks again soon, backing off only while the leader
stays behind: a whole replica.fetch.backoff.ms here would hold acks=all writes for that
long after every failover, and a new topic's first ones (one bench run in four of RF 3
acks=all lost half its throughput so). Other errors wait the whole backoff, as Kafka's
fetcher does."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from epochlog.protocol.errors import ErrorCode
from epochlog.replication.fetcher import LEADER_CATCH_UP_S, FollowedPartition, LeaderFetcher
from epochlog.replication.settings import ReplicationSettings
from epochlog.seams import Seams
from epochlog.sim.loop import SimClock, run_simulated

BACKOFF_MS = 1000


def retry_delays(codes: list[ErrorCode]) -> list[float]:
    """The wait a follower sets after each of these answers, in seconds."""

    async def answer_all(clock: SimClock) -> list[float]:
        seams = Seams(clock=clock, network=None, disk=None, random=None)  # type: ignore[arg-type]
        settings = ReplicationSettings(replica_fetch_backoff_ms=BACKOFF_MS)
        fetcher = LeaderFetcher(2, 0, seams, settings, lambda _: None, lambda: None)
        fp = FollowedPartition(SimpleNamespace(), leader_id=2, leader_epoch=1)  # type: ignore[arg-type]
        delays = []
        for code in codes:
            fetcher._handle(fp, SimpleNamespace(error_code=code))
            delays.append(fp.delayed_until - clock.monotonic())
        return delays

    return run_simulated(answer_all)


@pytest.mark.parametrize(
    "answer",
    [
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.UNKNOWN_TOPIC_ID,
    ],
)
def test_a_leader_behind_in_epoch_or_partition_is_asked_again_soon_then_less_often(
    answer: ErrorCode,
) -> None:
    behind = [answer] * 8
    assert retry_delays(behind) == pytest.approx(
        [LEADER_CATCH_UP_S * 2**k for k in range(6)] + [BACKOFF_MS / 1000] * 2
    )


def test_other_errors_wait_the_whole_backoff_and_reset_the_count() -> None:
    codes = [
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
    ]
    expected = [LEADER_CATCH_UP_S, 2 * LEADER_CATCH_UP_S, BACKOFF_MS / 1000, LEADER_CATCH_UP_S]
    assert retry_delays(codes) == pytest.approx(expected)
