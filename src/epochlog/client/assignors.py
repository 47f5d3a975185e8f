"""The classic "consumer" protocol's assignors (``range``, ``roundrobin``) and the
ConsumerProtocol subscription/assignment encodings, through kafka-python's classes so
that members of other clients read what ours write and the reverse. Pure: the group
leader calls ``assign`` with every member's subscription and the partition counts."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kafka.protocol.consumer import ConsumerProtocolAssignment, ConsumerProtocolSubscription

from epochlog.client.errors import TopicPartition

PROTOCOL_TYPE = "consumer"
# Version 0 of both structures: every client reads it (later versions add fields the
# eager protocol does not need).
SUBSCRIPTION_VERSION = 0
ASSIGNMENT_VERSION = 0

Assignment = dict[str, list[TopicPartition]]


def encode_subscription(topics: Iterable[str]) -> bytes:
    message = ConsumerProtocolSubscription(topics=sorted(set(topics)), user_data=None)
    return bytes(message.encode(version=SUBSCRIPTION_VERSION))


def decode_subscription(data: bytes) -> list[str]:
    """A member's subscribed topics (any version: the version is in the data)."""
    return list(ConsumerProtocolSubscription.decode(bytes(data)).topics or [])


def encode_assignment(partitions: Iterable[TopicPartition]) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    message = ConsumerProtocolAssignment(
        assigned_partitions=[
            ConsumerProtocolAssignment.TopicPartition(topic=t, partitions=sorted(ps))
            for t, ps in sorted(by_topic.items())
        ],
        user_data=None,
    )
    return bytes(message.encode(version=ASSIGNMENT_VERSION))


def decode_assignment(data: bytes | None) -> list[TopicPartition]:
    """The partitions a SyncGroup answer gives this member (empty data: none)."""
    if not data:
        return []
    message: Any = ConsumerProtocolAssignment.decode(bytes(data))
    return sorted(
        TopicPartition(t.topic, p) for t in message.assigned_partitions or [] for p in t.partitions
    )


def range_assign(
    subscriptions: Mapping[str, list[str]], partition_counts: Mapping[str, int]
) -> Assignment:
    """Kafka's RangeAssignor: per topic, its members in member-id order each take a
    contiguous range; the first ``count % members`` take one more."""
    out: Assignment = {m: [] for m in subscriptions}
    topics = sorted({t for ts in subscriptions.values() for t in ts})
    for topic in topics:
        count = partition_counts.get(topic, 0)
        members = sorted(m for m, ts in subscriptions.items() if topic in ts)
        if not members or count <= 0:
            continue
        share, extra = divmod(count, len(members))
        start = 0
        for i, member in enumerate(members):
            n = share + (1 if i < extra else 0)
            out[member].extend(TopicPartition(topic, p) for p in range(start, start + n))
            start += n
    return out


def roundrobin_assign(
    subscriptions: Mapping[str, list[str]], partition_counts: Mapping[str, int]
) -> Assignment:
    """Kafka's RoundRobinAssignor: every partition of every subscribed topic, in topic
    and partition order, dealt to the members in member-id order, skipping members not
    subscribed to its topic."""
    out: Assignment = {m: [] for m in subscriptions}
    members = sorted(subscriptions)
    if not members:
        return out
    topics = sorted({t for ts in subscriptions.values() for t in ts})
    turn = 0
    for topic in topics:
        for p in range(partition_counts.get(topic, 0)):
            for _ in range(len(members)):
                member = members[turn % len(members)]
                turn += 1
                if topic in subscriptions[member]:
                    out[member].append(TopicPartition(topic, p))
                    break
    return out


ASSIGNORS = {"range": range_assign, "roundrobin": roundrobin_assign}


def assign(
    strategy: str,
    subscriptions: Mapping[str, list[str]],
    partition_counts: Mapping[str, int],
) -> Assignment:
    """What the leader hands each member for the protocol the coordinator chose."""
    if strategy not in ASSIGNORS:
        raise ValueError(f"partition.assignment.strategy: unknown assignor {strategy!r}")
    return ASSIGNORS[strategy](subscriptions, partition_counts)
