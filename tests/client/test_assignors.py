"""The range and roundrobin assignors (pure), checked against kafka-python's range
assignor on many random groups and against hand-worked roundrobin cases; the
ConsumerProtocol encodings read back and are read by kafka-python."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.protocol.consumer import ConsumerProtocolAssignment, ConsumerProtocolSubscription

from epochlog.client import assignors
from epochlog.client.config import consumer_config
from epochlog.client.errors import ConfigError, TopicPartition


def tps(*pairs: tuple[str, int]) -> list[TopicPartition]:
    return [TopicPartition(t, p) for t, p in pairs]


def test_range_gives_the_first_members_one_more() -> None:
    got = assignors.assign("range", {"m2": ["t"], "m1": ["t"], "m3": ["t"]}, {"t": 7})
    assert got == {
        "m1": tps(("t", 0), ("t", 1), ("t", 2)),
        "m2": tps(("t", 3), ("t", 4)),
        "m3": tps(("t", 5), ("t", 6)),
    }


def test_roundrobin_deals_partitions_and_skips_members_not_subscribed() -> None:
    got = assignors.assign(
        "roundrobin", {"a": ["t", "u"], "b": ["t"], "c": ["u"]}, {"t": 3, "u": 3}
    )
    assert got == {
        "a": tps(("t", 0), ("t", 2), ("u", 1)),
        "b": tps(("t", 1)),
        "c": tps(("u", 0), ("u", 2)),
    }


def test_members_without_partitions_get_an_empty_list() -> None:
    for name in ("range", "roundrobin"):
        got = assignors.assign(name, {"a": ["t"], "b": ["t"], "c": ["gone"]}, {"t": 1})
        assert got["c"] == [] and sorted(got["a"] + got["b"]) == tps(("t", 0))


@pytest.mark.parametrize("seed", range(40))
def test_range_matches_kafka_python(seed: int) -> None:
    rng = random.Random(seed)
    counts = {f"topic{i}": rng.randint(1, 9) for i in range(rng.randint(1, 4))}
    subscriptions = {
        f"member-{rng.randint(0, 10**6)}": rng.sample(sorted(counts), rng.randint(1, len(counts)))
        for _ in range(rng.randint(1, 6))
    }
    cluster = SimpleNamespace(
        partitions_for_topic=lambda t: set(range(counts[t])) if t in counts else None
    )
    members = [
        SimpleNamespace(member_id=m, group_instance_id=None, metadata=SimpleNamespace(topics=ts))
        for m, ts in subscriptions.items()
    ]
    theirs = RangePartitionAssignor.assign(cluster, members)
    ours = assignors.assign("range", subscriptions, counts)
    for member, assignment in theirs.items():
        expected = sorted(
            TopicPartition(t, p) for t, ps in assignment.assigned_partitions for p in ps
        )
        assert sorted(ours[member]) == expected
    every = sorted(tp for got in ours.values() for tp in got)
    subscribed = {t for ts in subscriptions.values() for t in ts}
    assert every == sorted(TopicPartition(t, p) for t in subscribed for p in range(counts[t]))


def test_protocol_encodings_round_trip_and_interoperate() -> None:
    data = assignors.encode_subscription(["b", "a", "b"])
    assert assignors.decode_subscription(data) == ["a", "b"]
    assert ConsumerProtocolSubscription.decode(data).topics == ["a", "b"]
    # A later version, as other clients send it, is read too.
    v3 = ConsumerProtocolSubscription(
        topics=["x"], user_data=None, owned_partitions=[], generation_id=4, rack_id="r"
    ).encode(version=3)
    assert assignors.decode_subscription(bytes(v3)) == ["x"]

    mine = tps(("t", 2), ("a", 0), ("t", 0))
    data = assignors.encode_assignment(mine)
    assert assignors.decode_assignment(data) == sorted(mine)
    theirs = ConsumerProtocolAssignment.decode(data)
    assert [(t.topic, t.partitions) for t in theirs.assigned_partitions] == [
        ("a", [0]),
        ("t", [0, 2]),
    ]
    assert assignors.decode_assignment(b"") == []


def test_group_settings_are_checked() -> None:
    base = {"bootstrap.servers": "h:1"}
    conf = consumer_config(base)
    assert conf["partition.assignment.strategy"] == ("range",)
    assert (conf["enable.auto.commit"], conf["auto.commit.interval.ms"]) == (True, 5000)
    both = consumer_config({**base, "partition.assignment.strategy": "roundrobin, range"})
    assert both["partition.assignment.strategy"] == ("roundrobin", "range")
    with pytest.raises(ConfigError, match="partition.assignment.strategy"):
        consumer_config({**base, "partition.assignment.strategy": "sticky"})
    with pytest.raises(ValueError, match="unknown assignor"):
        assignors.assign("sticky", {}, {})
