"""Which ``__consumer_offsets`` partition a group lives in, as Kafka computes it, so that
a group keeps its partition (and its stored offsets) whatever broker software ran before."""

from __future__ import annotations

OFFSETS_TOPIC = "__consumer_offsets"

_INT_MIN = -(1 << 31)


def java_string_hash(value: str) -> int:
    """Java's ``String.hashCode``: ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code units,
    in signed 32-bit arithmetic."""
    h = 0
    data = value.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def kafka_abs(n: int) -> int:
    """Kafka's ``Utils.abs``: like abs, but Integer.MIN_VALUE maps to 0."""
    return 0 if n == _INT_MIN else abs(n)


def partition_for(group_id: str, num_partitions: int) -> int:
    """The offsets-topic partition of a group: ``abs(hashCode(group)) % partitions``."""
    return kafka_abs(java_string_hash(group_id)) % num_partitions
