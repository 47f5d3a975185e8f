"""The console's timeline from successive snapshots: epoch changes, and truncations as
the admin API shows them (the new leader's end of the previous epoch below what the old
leader held; replicas that held more moving after it), remembered across snapshots where
a broker did not answer."""

from __future__ import annotations

from typing import Any

from epochlog.console.history import History


def snapshot(
    time_ms: int,
    leader: int,
    epoch: int,
    ends: dict[int, Any],
    topic_id: str = "a",
    previous_end: tuple[int, int] | None = None,
) -> dict[str, Any]:
    partition: dict[str, Any] = {
        "partition": 0,
        "leader": leader,
        "leader_epoch": epoch,
        "replica_log_ends": {str(r): e for r, e in ends.items()},
    }
    if previous_end is not None:
        partition["previous_epoch_end"] = {"epoch": previous_end[0], "end_offset": previous_end[1]}
    return {
        "time_ms": time_ms,
        "topics": [
            {
                "name": "t",
                "topic_id": topic_id,
                "partitions": [partition],
            }
        ],
    }


def test_unclean_election_and_returning_replica_are_truncations() -> None:
    history = History()
    history.observe(snapshot(1, 0, 0, {0: 10, 1: 10, 2: 5}))
    # The old leader dies: its log end is unknown, its last known one is kept.
    history.observe(snapshot(2, 0, 0, {0: "connection refused", 1: "refused", 2: "timeout"}))
    # The new leader has not answered where epoch 0 ends on it yet.
    history.observe(snapshot(3, 2, 1, {0: "refused", 1: "refused", 2: 5}))
    assert history.truncations() == []
    history.observe(snapshot(4, 2, 1, {0: "refused", 1: "refused", 2: 7}, previous_end=(0, 5)))
    # The old leader returns and truncates to the new leader's log; by the time it is
    # seen it has fetched past the divergence point again.
    history.observe(snapshot(5, 2, 1, {0: 7, 1: "refused", 2: 7}))
    # Another returns, first seen still unchanged, then moved on.
    history.observe(snapshot(6, 2, 1, {0: 7, 1: 10, 2: 7}))
    history.observe(snapshot(7, 2, 1, {0: 7, 1: 11, 2: 11}))
    events = history.timeline()["t-0"]
    assert [e["kind"] for e in events] == [
        "seen",
        "leader_epoch",
        "leader_epoch",
        "truncation",
        "truncation",
        "truncation",
    ]
    epoch_change, by_election, by_replica, by_other = events[2:]
    assert (epoch_change["old_epoch"], epoch_change["new_epoch"]) == (0, 1)
    assert (epoch_change["old_leader"], epoch_change["new_leader"]) == (0, 2)
    assert by_election == {
        "time_ms": 4,
        "kind": "truncation",
        "cause": "election",
        "replica": 2,
        "first_offset": 5,
        "last_offset": 9,
        "records": 5,
        "epoch": 0,
        "old_leader": 0,
    }
    assert (by_replica["cause"], by_replica["replica"], by_replica["time_ms"]) == ("replica", 0, 5)
    assert (by_replica["first_offset"], by_replica["last_offset"]) == (5, 9)
    assert (by_other["replica"], by_other["time_ms"]) == (1, 7)
    assert (by_other["first_offset"], by_other["last_offset"]) == (5, 9)
    assert [t["time_ms"] for t in history.truncations()] == [4, 5, 7]


def test_a_log_end_going_down_is_a_truncation() -> None:
    history = History()
    history.observe(snapshot(1, 0, 0, {0: 10, 1: 10}))
    history.observe(snapshot(2, 0, 0, {0: 10, 1: 8}))
    (cut,) = history.truncations()
    assert (cut["replica"], cut["first_offset"], cut["last_offset"], cut["records"]) == (1, 8, 9, 2)


def test_clean_election_and_growth_are_no_truncation() -> None:
    history = History()
    history.observe(snapshot(1, 0, 0, {0: 10, 1: 10}))
    history.observe(snapshot(2, 1, 1, {0: 10, 1: 10}, previous_end=(0, 10)))
    history.observe(snapshot(3, 1, 1, {0: 12, 1: 12}))
    assert history.truncations() == []
    assert [e["kind"] for e in history.timeline()["t-0"]] == [
        "seen",
        "leader_epoch",
        "leader_epoch",
    ]


def test_recreated_topic_starts_a_new_history() -> None:
    history = History()
    history.observe(snapshot(1, 0, 3, {0: 10}))
    history.observe(snapshot(2, 0, 0, {0: 0}, topic_id="b"))
    assert history.truncations() == []
    assert history.timeline()["t-0"][0] == {"time_ms": 2, "kind": "seen", "topic_id": "b"}
