"""Fetch responses (v4–v13) encoded by hand as a list of parts, so record data is
never copied: a part may be a file range that the server sends with ``sendfile``.

Everything else goes through ``kafka.protocol``; this is the one hot path where a
generic encoder would copy megabytes per response.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field
from typing import Any, Protocol

from epochlog.protocol.wire_encoding import array_len, string, uvarint

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_TOP_V7 = struct.Struct(">ihi")
_PARTITION_HEAD = struct.Struct(">ihqq")
_DIVERGING = struct.Struct(">iqB")
_LEADER = struct.Struct(">iiB")

FIRST_FLEXIBLE = 12


class SizedPart(Protocol):
    size: int


Part = bytes | bytearray | memoryview | Any


@dataclass(slots=True)
class PartitionData:
    index: int
    error_code: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: list[Part] = field(default_factory=list)
    diverging_epoch: tuple[int, int] | None = None
    current_leader: tuple[int, int] | None = None
    preferred_read_replica: int = -1
    aborted_transactions: list[tuple[int, int]] | None = None
    # Offsets the records carry from the fetch offset on: counted, never encoded.
    offsets_sent: int = 0

    @property
    def records_size(self) -> int:
        return sum(part_size(p) for p in self.records)


@dataclass(slots=True)
class TopicData:
    name: str
    topic_id: uuid.UUID
    partitions: list[PartitionData]


def part_size(part: Part) -> int:
    if isinstance(part, bytes | bytearray | memoryview):
        return len(part)
    return part.size


def _tagged_fields(p: PartitionData) -> bytes:
    tags = []
    if p.diverging_epoch is not None:
        tags.append(b"\x00\x0d" + _DIVERGING.pack(p.diverging_epoch[0], p.diverging_epoch[1], 0))
    if p.current_leader is not None:
        tags.append(b"\x01\x09" + _LEADER.pack(p.current_leader[0], p.current_leader[1], 0))
    return uvarint(len(tags)) + b"".join(tags)


def _partition_head(p: PartitionData, version: int) -> bytes:
    flexible = version >= FIRST_FLEXIBLE
    out = bytearray(
        _PARTITION_HEAD.pack(p.index, p.error_code, p.high_watermark, p.last_stable_offset)
    )
    if version >= 5:
        out += _I64.pack(p.log_start_offset)
    if p.aborted_transactions is None:
        out += b"\x00" if flexible else _I32.pack(-1)
    else:
        out += array_len(len(p.aborted_transactions), flexible)
        for producer_id, first_offset in p.aborted_transactions:
            out += _I64.pack(producer_id) + _I64.pack(first_offset)
            if flexible:
                out += b"\x00"
    if version >= 11:
        out += _I32.pack(p.preferred_read_replica)
    size = p.records_size
    out += uvarint(size + 1) if flexible else _I32.pack(size)
    return bytes(out)


def encode_fetch_response(
    version: int,
    topics: list[TopicData],
    *,
    error_code: int = 0,
    session_id: int = 0,
    throttle_time_ms: int = 0,
) -> list[Part]:
    """The response body (no size prefix, no header) as parts to send in order."""
    flexible = version >= FIRST_FLEXIBLE
    parts: list[Part] = []
    head = bytearray(_I32.pack(throttle_time_ms))
    if version >= 7:
        head = bytearray(_TOP_V7.pack(throttle_time_ms, error_code, session_id))
    head += array_len(len(topics), flexible)
    for topic in topics:
        head += topic.topic_id.bytes if version >= 13 else string(topic.name, flexible)
        head += array_len(len(topic.partitions), flexible)
        for p in topic.partitions:
            head += _partition_head(p, version)
            if p.records:
                parts.append(bytes(head))
                parts.extend(p.records)
                head = bytearray()
            if flexible:
                head += _tagged_fields(p)
        if flexible:
            head += b"\x00"
    if flexible:
        head += b"\x00"
    parts.append(bytes(head))
    return parts
