"""__consumer_offsets record schemas and the group -> partition hash."""

from __future__ import annotations

import struct

from epochlog.coordinator.hashing import java_string_hash, kafka_abs, partition_for
from epochlog.coordinator.records import (
    GroupKey,
    OffsetKey,
    OffsetValue,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_offset_key,
    encode_offset_value,
    subscribed_topics,
)


def test_java_string_hash_matches_javas() -> None:
    # Values of "".hashCode(), "a".hashCode(), "hello".hashCode(), "polygenelubricants".
    assert java_string_hash("") == 0
    assert java_string_hash("a") == 97
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -(1 << 31)
    assert kafka_abs(-(1 << 31)) == 0
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("hello", 50) == 99162322 % 50
    # Characters outside the BMP count as two UTF-16 units, as in Java.
    assert java_string_hash("\U0001f600") == (31 * 0xD83D + 0xDE00)


def test_offset_key_and_value_v3_layout() -> None:
    key = encode_offset_key(OffsetKey("g", "t", 7))
    assert key == struct.pack(">hh1sh1si", 1, 1, b"g", 1, b"t", 7)
    assert decode_key(key) == OffsetKey("g", "t", 7)
    value = encode_offset_value(OffsetValue(42, 3, "meta", 1000))
    assert value[:2] == struct.pack(">h", 3)
    assert decode_offset_value(value) == OffsetValue(42, 3, "meta", 1000)
    assert decode_key(encode_group_key(GroupKey("g"))) == GroupKey("g")


def test_older_offset_values_read_without_epoch_and_expire_timestamp_is_ignored() -> None:
    v1 = struct.pack(">hqh", 1, 5, 0) + struct.pack(">qq", 111, 999)
    assert decode_offset_value(v1) == OffsetValue(5, -1, "", 111)
    v0 = struct.pack(">hqh", 0, 6, 1) + b"m" + struct.pack(">q", 7)
    assert decode_offset_value(v0) == OffsetValue(6, -1, "m", 7)


def test_subscription_topics_are_read_and_garbage_gives_none() -> None:
    sub = struct.pack(">hi", 1, 2) + struct.pack(">h", 1) + b"a" + struct.pack(">h", 1) + b"b"
    assert subscribed_topics(sub) == {"a", "b"}
    assert subscribed_topics(b"\x00") is None
