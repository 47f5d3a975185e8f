"""What a Fetch hands back, decoded two ways from the same raw record batches by the
same vectorised decoder (client/arrow_batches.py): the record path (a
``ConsumerRecord`` per record, for applications) and the columnar path (one Arrow
RecordBatch, for Spark and analytics). Both hand out the same records and move the
positions the same way."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import pyarrow as pa

from epochlog.client.arrow_batches import (
    Progress,
    decode_fetched,
    decode_fetched_records,
    empty_batch,
)
from epochlog.client.errors import TopicPartition
from epochlog.client.positions import PartitionPosition
from epochlog.protocol.batch import Buffer

# One partition's fetched record batches (a view of the Fetch answer's frame), with its
# position (moved by decoding them) and, under read_committed, the aborted transactions
# of the range (else None).
Fetched = tuple[TopicPartition, PartitionPosition, Buffer, "list[tuple[int, int]] | None"]


@dataclass(slots=True)
class ConsumerRecord:
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]
    leader_epoch: int | None


@dataclass(frozen=True)
class OffsetAndEpoch:
    """A position to commit or seek to: offset and the epoch of the record before it."""

    offset: int
    leader_epoch: int | None = None


class ConsumerRecords(list[ConsumerRecord]):
    """The records of one poll, with the positions after them, ready to commit."""

    def __init__(
        self,
        records: Iterable[ConsumerRecord] = (),
        next_offsets: Mapping[TopicPartition, OffsetAndEpoch] | None = None,
    ) -> None:
        super().__init__(records)
        self._next = dict(next_offsets or {})

    def next_offsets(self) -> dict[TopicPartition, OffsetAndEpoch]:
        return dict(self._next)


def records_of(fetched: list[Fetched], check_crc: bool) -> ConsumerRecords:
    """The record path: one ConsumerRecord per record, positions to commit per
    partition that gave records."""
    records: list[ConsumerRecord] = []
    next_offsets = {}
    for tp, pos, data, aborted in fetched:
        got = _decode(tp, pos, data, check_crc, aborted)
        if got:
            records.extend(got)
            if pos.offset is not None:
                next_offsets[tp] = OffsetAndEpoch(pos.offset, pos.offset_epoch)
    return ConsumerRecords(records, next_offsets)


def _decode(
    tp: TopicPartition,
    pos: PartitionPosition,
    data: Buffer,
    check_crc: bool,
    aborted: list[tuple[int, int]] | None,
) -> list[ConsumerRecord]:
    assert pos.offset is not None
    records, progress = decode_fetched_records(
        data,
        tp.topic,
        tp.partition,
        pos.offset,
        ConsumerRecord,
        check_crc=check_crc,
        aborted=aborted,
    )
    _advance(pos, progress)
    return records


def _advance(pos: PartitionPosition, progress: list[Progress]) -> None:
    """Move the position past what was handed out, as record-by-record decoding
    would: one step per run of batches of one leader epoch."""
    for run in progress:
        timestamp = run.last_timestamp
        pos.consumed(
            run.next_offset,
            run.leader_epoch,
            (pos.last_timestamp or -1) if timestamp is None else timestamp,
            run.first_offset,
        )


def arrow_of(fetched: list[Fetched], check_crc: bool) -> pa.RecordBatch:
    """The columnar path: every partition's batches into one RecordBatch."""
    parts = []
    for tp, pos, data, aborted in fetched:
        assert pos.offset is not None
        table, progress = decode_fetched(
            data, tp.topic, tp.partition, pos.offset, check_crc=check_crc, aborted=aborted
        )
        _advance(pos, progress)
        if table.num_rows:
            parts.append(table)
    if not parts:
        return empty_batch()
    return parts[0] if len(parts) == 1 else pa.concat_batches(parts)
