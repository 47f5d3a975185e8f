"""The source's pure parts, without Spark or brokers: options as Spark's Kafka source
names them, the offset JSON round trip, the decisions on truncation, retention, a
re-created topic and new partitions, and admission control's shares."""

from __future__ import annotations

import json

import pytest

from epochlog.client import TopicPartition
from epochlog.client.config import consumer_config
from epochlog.spark.leader_view import ClusterSnapshot, PartitionView
from epochlog.spark.offsets import (
    DataLossError,
    Position,
    SourceOffset,
    limit_ends,
    plan_starts,
)
from epochlog.spark.options import EARLIEST, LATEST, SourceOptionError, parse_options
from epochlog.spark.stream_reader import EpochlogStreamReader, split_ranges

TP = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


def snapshot(
    log_start: int = 0,
    hw: int = 100,
    epoch_end: tuple[int, int] | None = None,
    topic_id: str = "id-1",
    partitions: tuple[TopicPartition, ...] = (TP,),
) -> ClusterSnapshot:
    snap = ClusterSnapshot(topic_ids={"t": topic_id})
    for tp in partitions:
        snap.partitions[tp] = PartitionView(0, 3, log_start, hw)
        if epoch_end is not None:
            snap.epoch_ends[tp] = epoch_end
    return snap


def offset_at(offset: int, epoch: int, topic_id: str = "id-1", timestamp: int = -1) -> SourceOffset:
    return SourceOffset(
        topic_ids={"t": topic_id}, positions={TP: Position(offset, epoch, timestamp)}
    )


def test_options_follow_sparks_kafka_source() -> None:
    opts = parse_options(
        {
            "kafka.bootstrap.servers": "127.0.0.1:9092",
            "subscribe": "a, b",
            "startingOffsets": json.dumps({"a": {"0": {"offset": 5, "epoch": 2}, "1": -2}}),
            "maxOffsetsPerTrigger": "10",
            "includeHeaders": "true",
            "onTruncation": "Closest",
            "kafka.fetch.max.wait.ms": "100",
        },
        streaming=True,
    )
    assert opts.bootstrap_servers == "127.0.0.1:9092"
    assert opts.subscribe == ("a", "b")
    assert opts.starting.offsets == {("a", 0): (5, 2), ("a", 1): (EARLIEST, -1)}
    assert opts.starting.default == LATEST
    assert (opts.max_offsets_per_trigger, opts.include_headers) == (10, True)
    assert opts.on_truncation == "closest"
    assert opts.consumer_config()["fetch.max.wait.ms"] == "100"
    assert parse_options({"bootstrap.servers": "h:1", "assign": '{"x": [1, 0]}'}, False).assign == {
        "x": (0, 1)
    }


def test_a_tasks_fetches_wait_briefly_at_the_log_end_unless_told_otherwise() -> None:
    """A task's consumer sends its next fetch as it hands out the range's last rows;
    the close's fetch-session request queues behind that fetch's long poll at the log
    end. The source's short wait keeps that from holding up every task."""
    client_default = consumer_config({"bootstrap.servers": "h:1"})["fetch.max.wait.ms"]
    wait = parse_options({"kafka.bootstrap.servers": "h:1", "subscribe": "a"}, True)
    assert wait.consumer_config()["fetch.max.wait.ms"] * 10 < client_default


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"subscribe": "a"}, "bootstrap.servers"),
        ({"bootstrap.servers": "h:1"}, "subscribe"),
        ({"bootstrap.servers": "h:1", "subscribe": "a", "assign": '{"a": [0]}'}, "subscribe"),
        ({"bootstrap.servers": "h:1", "subscribe": "a", "onTruncation": "skip"}, "onTruncation"),
        ({"bootstrap.servers": "h:1", "subscribe": "a", "startingOffsets": "{"}, "startingOffsets"),
        ({"bootstrap.servers": "h:1", "subscribePattern": "("}, "subscribePattern"),
        ({"bootstrap.servers": "h:1", "subscribe": "a", "kafka.no.such": "1"}, "kafka.no.such"),
        ({"bootstrap.servers": "h:1", "subscribe": "a", "kafka.group.id": "g"}, "kafka.group.id"),
        (
            {"bootstrap.servers": "h:1", "subscribe": "a", "endingOffsets": "latest"},
            "endingOffsets",
        ),
    ],
)
def test_a_wrong_option_is_named(options: dict[str, str], named: str) -> None:
    with pytest.raises(SourceOptionError, match=named):
        parse_options(options, streaming=True)


def test_offset_json_round_trips_with_starts_and_events() -> None:
    offset = SourceOffset(
        topic_ids={"t": "id-1"},
        positions={TP: Position(10, 2), TP1: Position(4)},
        starts={TP: Position(5, 1)},
        events=[{"event": "truncation", "message": "m"}],
    )
    data = json.loads(json.dumps(offset.to_json()))
    assert SourceOffset.from_json(data) == offset
    assert data["topics"]["t"]["partitions"]["1"] == {"offset": 4, "epoch": -1}
    assert offset.batch_start(TP, SourceOffset()) == Position(5, 1)


def test_no_divergence_keeps_the_position() -> None:
    starts, moved, events = plan_starts(offset_at(10, 3), snapshot(epoch_end=(3, 40)), "fail")
    assert (starts, moved, events) == ({TP: Position(10, 3)}, {}, [])


def test_truncation_with_fail_names_the_partition_and_the_exact_range() -> None:
    with pytest.raises(DataLossError, match=r"t-0: offsets 5\.\.9 \(5 records\)") as caught:
        plan_starts(offset_at(10, 2), snapshot(epoch_end=(2, 5)), "fail")
    (event,) = caught.value.events
    assert (event["lostFrom"], event["lostUntil"]) == (5, 10)


@pytest.mark.parametrize("policy", ["earliest", "latest", "closest"])
def test_known_divergence_resumes_there_under_every_policy(policy: str) -> None:
    starts, moved, (event,) = plan_starts(offset_at(10, 2), snapshot(epoch_end=(1, 5)), policy)
    assert starts[TP] == moved[TP] == Position(5, 1)
    assert (event["event"], event["lostFrom"], event["resumeAt"]) == ("truncation", 5, 5)


@pytest.mark.parametrize(("policy", "resume"), [("earliest", 2), ("latest", 8), ("closest", 8)])
def test_unknown_divergence_follows_the_reset_table(policy: str, resume: int) -> None:
    # The leader knows no epoch at or below ours: where we diverged is unknown.
    snap = snapshot(log_start=2, hw=8, epoch_end=(-1, -1))
    starts, _, (event,) = plan_starts(offset_at(10, 2), snap, policy)
    assert starts[TP].offset == resume
    assert (event["lostFrom"], event["lostUntil"], event["resumeAt"]) == (-1, 10, resume)


@pytest.mark.parametrize(("policy", "resume"), [("earliest", 2), ("latest", 8), ("closest", 6)])
def test_unknown_divergence_with_closest_resumes_at_the_last_read_records_time(
    policy: str, resume: int
) -> None:
    asked: list[tuple[TopicPartition, int]] = []

    def offset_for_time(tp: TopicPartition, timestamp: int) -> int:
        asked.append((tp, timestamp))
        return 6  # the first record at or after that time on the new leader

    snap = snapshot(log_start=2, hw=8, epoch_end=(-1, -1))
    starts, _, (event,) = plan_starts(
        offset_at(10, 2, timestamp=5_000), snap, policy, offset_for_time
    )
    assert starts[TP].offset == event["resumeAt"] == resume
    assert asked == ([(TP, 5_000)] if policy == "closest" else [])


def test_a_position_keeps_its_records_time_in_the_checkpoint() -> None:
    offset = offset_at(10, 2, timestamp=1_700_000_000_123)
    data = json.loads(json.dumps(offset.to_json()))
    assert data["topics"]["t"]["partitions"]["0"] == {
        "offset": 10,
        "epoch": 2,
        "timestamp": 1_700_000_000_123,
    }
    assert SourceOffset.from_json(data) == offset


def test_a_position_without_epoch_beyond_the_log_end_is_a_truncation() -> None:
    starts, _, (event,) = plan_starts(offset_at(10, -1), snapshot(hw=7), "earliest")
    assert starts[TP] == Position(7)
    assert (event["lostFrom"], event["lostUntil"]) == (7, 10)


def test_retention_below_the_position_is_reported_then_skipped() -> None:
    with pytest.raises(DataLossError, match=r"offsets 3\.\.19 \(17 records\) were deleted"):
        plan_starts(offset_at(3, 0), snapshot(log_start=20, epoch_end=(3, 100)), "fail")
    starts, moved, (event,) = plan_starts(
        offset_at(3, 0), snapshot(log_start=20, epoch_end=(3, 100)), "latest"
    )
    assert starts[TP] == moved[TP] == Position(20)
    assert (event["event"], event["lostFrom"], event["lostUntil"]) == ("retention", 3, 20)


def test_recreated_topic_is_reported_and_new_partitions_start_at_their_log_start() -> None:
    snap = snapshot(log_start=0, topic_id="id-2", partitions=(TP, TP1))
    with pytest.raises(DataLossError, match="topic re-created"):
        plan_starts(offset_at(10, 0), snap, "fail")
    starts, moved, events = plan_starts(offset_at(10, 0), snap, "earliest")
    assert starts == moved == {TP: Position(0), TP1: Position(0)}
    assert [e["event"] for e in events] == ["topicRecreated", "newPartition"]


def test_new_partition_alone_is_no_loss_even_with_fail() -> None:
    snap = snapshot(log_start=4, partitions=(TP, TP1), epoch_end=(0, 100))
    starts, moved, (event,) = plan_starts(offset_at(10, 0), snap, "fail")
    assert moved == {TP1: Position(4)} and event["event"] == "newPartition"


def test_limit_shares_max_rows_in_proportion_and_sums_exactly() -> None:
    starts = {TP: Position(0), TP1: Position(10)}
    assert limit_ends(starts, {TP: 130, TP1: 130}, None) == {TP: 130, TP1: 130}
    ends = limit_ends(starts, {TP: 130, TP1: 130}, 100)
    assert sum(ends[tp] - starts[tp].offset for tp in starts) == 100
    assert ends == {TP: 52, TP1: 58}
    assert limit_ends(starts, {TP: 3, TP1: 10}, 100) == {TP: 3, TP1: 10}


def test_min_partitions_cuts_ranges_in_proportion_and_keeps_the_start_epoch() -> None:
    ranges = {
        TP: (Position(10, 4), 310),
        TP1: (Position(0), 100),
        TopicPartition("u", 0): (Position(5), 5),
    }
    pieces = split_ranges(ranges, 4)
    assert [(tp.partition, s.offset, s.epoch, u) for tp, s, u in pieces] == [
        (0, 10, 4, 110),
        (0, 110, -1, 210),
        (0, 210, -1, 310),
        (1, 0, -1, 100),
    ]
    assert split_ranges(ranges, None) == [(TP, Position(10, 4), 310), (TP1, Position(0), 100)]


def test_a_replayed_batch_is_planned_from_the_two_offsets_alone() -> None:
    """partitions(start, end) asks nobody: the moved start recorded in the end offset is
    where the batch begins, so a replay from the checkpoint reads the same ranges."""
    options = parse_options({"bootstrap.servers": "127.0.0.1:1", "subscribe": "t"}, True)
    reader = EpochlogStreamReader(options)
    start = SourceOffset({"t": "id-1"}, {TP: Position(10, 2), TP1: Position(3, 0)}).to_json()
    end = SourceOffset(
        {"t": "id-1"},
        {TP: Position(8, 3), TP1: Position(3, 0)},
        starts={TP: Position(5, 1)},
        events=[{"event": "truncation", "message": "m"}],
    ).to_json()
    end = json.loads(json.dumps(end))
    parts = reader.partitions(start, end)
    assert [(p.topic, p.partition, p.start, p.start_epoch, p.until) for p in parts] == [
        ("t", 0, 5, 1, 8)
    ]
    assert parts[0].on_truncation == "fail"
    assert parts[0].config["bootstrap.servers"] == "127.0.0.1:1"
