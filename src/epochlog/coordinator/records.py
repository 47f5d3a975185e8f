"""Kafka's record schemas of ``__consumer_offsets`` (keys and values), so that the topic
reads the same to Kafka's own tools and survives a move between implementations.

- OffsetCommitKey v0/v1: group, topic, partition.
- OffsetCommitValue v0..v3; written at v3 (KIP-320): offset, leader epoch, metadata,
  commit timestamp. v1 carried an expire timestamp, which is read and ignored (KIP-211).
- GroupMetadataKey v2: group.
- GroupMetadataValue v0..v3; written at v3: protocol type, generation, protocol, leader,
  current state timestamp, members (id, instance id, client id and host, timeouts,
  subscription, assignment).

A null value is a tombstone: the key's offset or group is deleted.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from epochlog.protocol.errors import ErrorCode, KafkaError
from epochlog.protocol.fields import FieldReader, FieldWriter

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
GROUP_VALUE_VERSION = 3
NO_EPOCH = -1


@dataclass(frozen=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupKey:
    group: str


@dataclass(frozen=True)
class OffsetValue:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int


@dataclass(frozen=True)
class MemberValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: list[MemberValue] = field(default_factory=list)


def encode_offset_key(key: OffsetKey) -> bytes:
    w = FieldWriter().int16(OFFSET_KEY_VERSION).string(key.group).string(key.topic)
    return bytes(w.int32(key.partition).buf)


def encode_group_key(key: GroupKey) -> bytes:
    return bytes(FieldWriter().int16(GROUP_KEY_VERSION).string(key.group).buf)


def decode_key(data: bytes) -> OffsetKey | GroupKey:
    """Offset keys are versions 0 and 1, group keys version 2 (Kafka's convention)."""
    r = FieldReader(data)
    version = r.int16()
    if version in (0, 1):
        return OffsetKey(r.string(), r.string(), r.int32())
    if version == 2:
        return GroupKey(r.string())
    raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"unknown offsets key version {version}")


def encode_offset_value(value: OffsetValue) -> bytes:
    w = FieldWriter().int16(OFFSET_VALUE_VERSION).int64(value.offset).int32(value.leader_epoch)
    return bytes(w.string(value.metadata).int64(value.commit_timestamp).buf)


def decode_offset_value(data: bytes) -> OffsetValue:
    r = FieldReader(data)
    version = r.int16()
    if version == 0 or version == 2:
        offset, metadata, ts = r.int64(), r.string(), r.int64()
        return OffsetValue(offset, NO_EPOCH, metadata, ts)
    if version == 1:
        offset, metadata, ts = r.int64(), r.string(), r.int64()
        r.int64()  # expire timestamp: ignored, retention is the broker's (KIP-211)
        return OffsetValue(offset, NO_EPOCH, metadata, ts)
    if version == 3:
        offset, epoch = r.int64(), r.int32()
        return OffsetValue(offset, epoch, r.string(), r.int64())
    raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"unknown offset value version {version}")


def encode_group_value(value: GroupValue) -> bytes:
    w = FieldWriter().int16(GROUP_VALUE_VERSION).string(value.protocol_type).int32(value.generation)
    w.string(value.protocol).string(value.leader).int64(value.current_state_timestamp)
    w.int32(len(value.members))
    for m in value.members:
        w.string(m.member_id).string(m.group_instance_id).string(m.client_id)
        w.string(m.client_host).int32(m.rebalance_timeout_ms).int32(m.session_timeout_ms)
        w.blob(m.subscription).blob(m.assignment)
    return bytes(w.buf)


def decode_group_value(data: bytes) -> GroupValue:
    r = FieldReader(data)
    version = r.int16()
    if not 0 <= version <= 3:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"unknown group value version {version}")
    protocol_type, generation = r.string(), r.int32()
    protocol, leader = r.nullable_string(), r.nullable_string()
    timestamp = r.int64() if version >= 2 else -1
    members = []
    for _ in range(r.int32()):
        member_id = r.string()
        instance_id = r.nullable_string() if version >= 3 else None
        client_id, client_host = r.string(), r.string()
        rebalance_timeout = r.int32() if version >= 1 else -1
        session_timeout = r.int32()
        if rebalance_timeout < 0:
            rebalance_timeout = session_timeout
        members.append(
            MemberValue(
                member_id,
                instance_id,
                client_id,
                client_host,
                rebalance_timeout,
                session_timeout,
                r.blob(),
                r.blob(),
            )
        )
    return GroupValue(protocol_type, generation, protocol, leader, timestamp, members)


def subscribed_topics(subscription: bytes) -> set[str] | None:
    """Topics of a ConsumerProtocolSubscription (any version starts with version, topics);
    None when it cannot be read, so that nothing is expired on a guess."""
    try:
        r = FieldReader(subscription)
        r.int16()
        count = r.int32()
        if count < 0:
            return None
        return {r.string() for _ in range(count)}
    except KafkaError:
        return None
