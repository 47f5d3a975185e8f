"""Reads of a partition's log: fetch slices, headers for replay, lookups by time.

A fetch returns file ranges (``FileSlice``) of whole batches, never the bytes: the
network layer sends them with ``sendfile``. Only batch headers are read to find
boundaries, and the sparse offset index keeps that scan short.
"""

from __future__ import annotations

from collections.abc import Iterator

from epochlog.protocol.batch import BatchHeader
from epochlog.protocol.errors import ErrorCode, KafkaError
from epochlog.protocol.records import iter_records
from epochlog.storage.log_view import LogView
from epochlog.storage.results import OffsetAndEpoch, ReadResult
from epochlog.storage.segment import DamagedBatch, FileSlice, LogSegment


def _record_timestamps(batch: bytes) -> list[tuple[int, int]]:
    """(offset, timestamp) of each record of a stored batch (CRC checked at append)."""
    return [(r.offset, r.timestamp) for r in iter_records(batch, check_crc=False)]


class LogReader:
    def __init__(self, log: LogView) -> None:
        self._log = log

    def headers_from(self, offset: int) -> Iterator[tuple[LogSegment, BatchHeader]]:
        """Every batch header from the one holding ``offset`` to the log end."""
        segments = self._log.segments
        for segment in segments[self._log.segment_for(offset) :]:
            found = segment.find_batch(offset)
            if found is None:
                continue
            for _, header in segment.iter_headers(found[0]):
                yield segment, header

    def read(
        self, start_offset: int, max_bytes: int, max_offset: int | None, min_one_batch: bool
    ) -> ReadResult:
        """Whole batches from the one holding ``start_offset``, within one segment.

        Stops before a batch whose base offset is >= ``max_offset`` (the high watermark)
        and within ``max_bytes``, except that ``min_one_batch`` lets a first batch larger
        than ``max_bytes`` through (so a consumer can always make progress). Raises
        OFFSET_OUT_OF_RANGE outside [log start, log end].

        Batches found on disk at startup and not yet checked in this run are CRC-checked
        first; a damaged one is never served: it becomes a hole (``Log.damage_found``),
        and the read answers from what is left. A read stops before a hole; one starting
        inside a hole is refused with KAFKA_STORAGE_ERROR (a client retries, and finds the
        partition's next leader), unless no replica holds the hole (``Hole.lost``): then
        it reads on from the hole's end, and the reader sees a gap in offsets.
        """
        while True:
            try:
                return self._read(start_offset, max_bytes, max_offset, min_one_batch)
            except DamagedBatch as damage:
                self._log.damage_found(damage, "a read's CRC check")

    def _read(
        self, start_offset: int, max_bytes: int, max_offset: int | None, min_one_batch: bool
    ) -> ReadResult:
        log = self._log
        start, end = log.log_start_offset, log.log_end_offset
        if start_offset < start or start_offset > end:
            raise KafkaError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"offset {start_offset} outside [{start}, {end}] of {log.topic}-{log.partition}",
            )
        while (covering := log.holes.covering(start_offset)) is not None:
            if not covering.lost:
                raise KafkaError(
                    ErrorCode.KAFKA_STORAGE_ERROR,
                    f"offsets {covering.first_offset}..{covering.end_offset - 1} of "
                    f"{log.topic}-{log.partition} are damaged on this replica",
                )
            start_offset = covering.end_offset
        limit_offset = end if max_offset is None else min(max_offset, end)
        hole = log.holes.read_limit(start_offset)
        if hole is not None:
            limit_offset = min(limit_offset, hole)
        empty = ReadResult([], start, end)
        if start_offset >= limit_offset:
            return empty
        for segment in log.segments[log.segment_for(start_offset) :]:
            found = segment.find_batch(start_offset)
            if found is None:
                continue
            first_position, first = found
            if first.base_offset >= limit_offset:
                return empty
            size, next_offset = self._extent(
                segment, first_position, first, max_bytes, limit_offset
            )
            if size == 0:
                if not min_one_batch:
                    return empty
                size, next_offset = first.size, first.next_offset
            # A log already found damaged in this run is checked on every read.
            again = bool(log.damage_cuts) or bool(log.holes)
            segment.check(first_position, first_position + size, again=again)
            read = [FileSlice(segment.file, first_position, size)]
            return ReadResult(read, start, end, next_offset)
        return empty

    def _extent(
        self,
        segment: LogSegment,
        position: int,
        first: BatchHeader,
        max_bytes: int,
        limit_offset: int,
    ) -> tuple[int, int]:
        """Bytes of whole batches from ``position`` within both limits, and the offset
        after the last of them."""
        limit_position = position + max_bytes
        scan_from = position
        entry = segment.offset_index.floor_position(limit_position, limit_offset)
        if entry is not None and entry[1] > position:
            scan_from = entry[1]
        # Batches before an index entry within both limits are whole and within them.
        end = scan_from
        next_offset = first.base_offset
        for batch_position, header in segment.iter_headers(scan_from):
            batch_end = batch_position + header.size
            if header.base_offset >= limit_offset or batch_end > limit_position:
                next_offset = header.base_offset
                break
            end, next_offset = batch_end, header.next_offset
        return end - position, next_offset

    def _epoch(self, offset: int) -> int:
        return self._log.epoch_cache.epoch_for_offset(offset)

    def offset_for_timestamp(self, timestamp: int) -> OffsetAndEpoch | None:
        """The first record whose timestamp is >= ``timestamp`` (ListOffsets by time)."""
        log = self._log
        for segment in log.segments:
            if segment.max_timestamp < timestamp:
                continue
            found = segment.find_by_timestamp(timestamp)
            while found is not None and found[1].last_offset < log.log_start_offset:
                found = segment.find_batch(found[1].next_offset)
            if found is None:
                continue
            position, header = found
            return self._record_at_or_after(segment, position, header, timestamp)
        return None

    def _record_at_or_after(
        self, segment: LogSegment, position: int, header: BatchHeader, timestamp: int
    ) -> OffsetAndEpoch:
        start = self._log.log_start_offset
        records = None
        if not header.is_log_append_time:
            records = _record_timestamps(segment.file.pread(header.size, position))
        for offset, ts in records or ():
            if ts >= timestamp and offset >= start:
                return OffsetAndEpoch(offset, ts, self._epoch(offset))
        offset = max(header.base_offset, start)
        return OffsetAndEpoch(offset, header.max_timestamp, self._epoch(offset))

    def aborted_transactions(self, start: int, upper: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of aborted transactions overlapping [start, upper):
        what a read_committed fetch of that range answers beside the records."""
        out = []
        for segment in self._log.segments[self._log.segment_for(start) :]:
            out.extend(
                (t.producer_id, t.first_offset) for t in segment.txn_index.collect(start, upper)
            )
        return out

    def max_timestamp(self) -> OffsetAndEpoch | None:
        """The record with the largest timestamp (ListOffsets MAX_TIMESTAMP), first if tied."""
        best: LogSegment | None = None
        for segment in self._log.segments:
            if segment.max_timestamp >= 0 and (
                best is None or segment.max_timestamp > best.max_timestamp
            ):
                best = segment
        if best is None:
            return None
        found = best.find_batch(best.offset_of_max_timestamp)
        if found is None:
            return None
        position, header = found
        records = None
        if not header.is_log_append_time:
            records = _record_timestamps(best.file.pread(header.size, position))
        for offset, ts in records or ():
            if ts == best.max_timestamp:
                return OffsetAndEpoch(offset, ts, self._epoch(offset))
        offset = header.last_offset
        return OffsetAndEpoch(offset, header.max_timestamp, self._epoch(offset))
