"""The batches of a fetch answer a consumer hands out (position, read_committed) and
their records decoded as columns (``epochlog.protocol.record_columns``), for
client/arrow_batches.py."""

from __future__ import annotations

import struct
from typing import NamedTuple

import crc32c
import numpy as np

from epochlog.protocol import batch as _batch
from epochlog.protocol.batch import Buffer
from epochlog.protocol.compression import decompress
from epochlog.protocol.control import read_marker
from epochlog.protocol.errors import ErrorCode, KafkaError
from epochlog.protocol.record_columns import NO_APPEND_TIME, Fields, decode_records


def _invalid(message: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_RECORD, message)


class WalkedBatch(NamedTuple):
    """One whole batch of a fetch answer to hand out: records from ``threshold`` on."""

    at: int
    end: int
    base_offset: int
    next_offset: int
    leader_epoch: int
    attributes: int
    crc: int
    records_count: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    threshold: int
    # Part of an aborted transaction (read_committed): walked past, never handed out.
    aborted: bool = False

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _batch.CONTROL_BIT)

    @property
    def has_no_rows(self) -> bool:
        """A marker or an aborted transaction's batch: the position moves past it."""
        return self.aborted or bool(self.attributes & _batch.CONTROL_BIT)


_HEADER = struct.Struct(">qiibIhiqqqhii")


def walk_batches(
    data: Buffer, fetch_offset: int, aborted: list[tuple[int, int]] | None = None
) -> list[WalkedBatch]:
    """The whole batches of a fetch answer that reach past the position, in order.

    A batch that ends at or below the position so far is skipped; records of a batch
    below it are dropped (a fetch from the middle of a batch returns all of it); a
    partial batch at the end of the answer is left for the next fetch. Both the
    record path and the Arrow path hand out exactly these.

    ``aborted``: the fetch answer's aborted transactions (producer id, first offset),
    read_committed. Kafka's rule: a transaction becomes aborted for its producer at its
    first offset; that producer's transactional batches are dropped until its ABORT
    marker.
    """
    pending = sorted(aborted or (), key=lambda a: a[1])
    active: set[int] = set()
    out = []
    append = out.append
    position = fetch_offset
    at = 0
    total = len(data)
    unpack = _HEADER.unpack_from
    smallest = _batch.HEADER_SIZE - _batch.LOG_OVERHEAD
    while at + _batch.HEADER_SIZE <= total:
        base, length, epoch, magic, crc, attrs, delta, ts, max_ts, pid, _, _, count = unpack(
            data, at
        )
        if magic != 2:
            raise KafkaError(
                ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT, f"record batch magic {magic}, not 2"
            )
        if length < smallest:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"batch length {length}")
        end = at + length + _batch.LOG_OVERHEAD
        if end > total:
            break
        next_offset = base + delta + 1
        dropped = False
        if pending or active:
            while pending and pending[0][1] <= base + delta:
                active.add(pending.pop(0)[0])
            if pid in active and attrs & _batch.TRANSACTIONAL_BIT:
                dropped = True
                if attrs & _batch.CONTROL_BIT and not read_marker(data[at:end])[0]:
                    active.discard(pid)
        if next_offset > position:
            append(
                WalkedBatch(
                    at,
                    end,
                    base,
                    next_offset,
                    epoch,
                    attrs,
                    crc,
                    count,
                    delta,
                    ts,
                    max_ts,
                    position,
                    dropped,
                )
            )
            position = next_offset
        at = end
    return out


def decode_walked(data: Buffer, walked: list[WalkedBatch], check_crc: bool) -> Fields | None:
    """Every record of the batches ``walk_batches`` picked (control batches have none)."""
    view = memoryview(data)
    sections: list[tuple[int, int, int]] = []  # start, end, count in ``data``
    meta: list[tuple[int, int, int, int, int]] = []
    compressed: list[tuple[int, bytes]] = []  # (index in sections, decompressed records)
    crc32 = crc32c.crc32c
    attributes_at = _batch.ATTRIBUTES
    for w in walked:
        if w.records_count < 0 or w.last_offset_delta < 0:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "negative record count or offset delta")
        if check_crc and crc32(view[w.at + attributes_at : w.end]) != w.crc:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "record batch CRC32C mismatch")
        attrs = w.attributes
        if w.has_no_rows:
            continue
        start = w.at + _batch.HEADER_SIZE
        codec = attrs & _batch.COMPRESSION_MASK
        if codec:
            compressed.append((len(sections), decompress(codec, view[start : w.end])))
        sections.append((start, w.end, w.records_count))
        meta.append(
            (
                w.base_offset,
                w.max_timestamp if attrs & _batch.TIMESTAMP_TYPE_BIT else NO_APPEND_TIME,
                w.base_timestamp,
                w.leader_epoch,
                w.threshold,
            )
        )
    if compressed:
        # Uncompressed records stay where they are; decompressed ones go after them.
        pieces: list[Buffer] = [data]
        joined = len(data)
        for index, records in compressed:
            sections[index] = (joined, joined + len(records), sections[index][2])
            pieces.append(records)
            joined += len(records)
        data = b"".join(pieces)
    if not sections:
        return None
    return decode_records(
        data,
        np.array(sections, dtype=np.int64).reshape(-1, 3),
        np.array(meta, dtype=np.int64),
    )
