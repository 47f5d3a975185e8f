"""The log cleaner: compaction of logs whose ``cleanup.policy`` contains ``compact``.

For each key only its latest record survives; a tombstone (null value) survives until
``delete.retention.ms`` after it was written, so a consumer reading the log within that
window still sees the delete. "Written" is its batch's max timestamp: Kafka uses the
segment file's modification time, which the Disk seam does not offer and which merging
segments keeps moving forward (a tombstone merged into newer segments would never go).
Survivors keep their offsets, timestamps, headers, leader epochs and producer fields:
offsets simply gain gaps.

Only sealed segments wholly below an upper bound given by the caller are touched. The
storage layer does not know the high watermark, and it must be the bound: compacting
away a committed value because of a newer, uncommitted one would lose that key's value
for good if a new leader truncates the newer record. The active segment never qualifies.

A cleaning pass works on a prefix of the log: the already-clean part, then as much of
the dirty part (from the first dirty offset, checkpointed in ``cleaner-offset-checkpoint``)
as the offset map holds. Consecutive segments are grouped up to ``segment.bytes`` and
each group becomes one segment, swapped in so a crash at any point leaves either the old
or the new segments:

1. write ``<base>.log.cleaned`` and fsync it;
2. rename it to ``<base>.log.swap`` (the commit point: recovery now finishes the swap);
3. remove the group's old index and log files;
4. rename the swap to ``<base>.log`` and rebuild its indexes from it.

On load, :func:`finish_interrupted_swaps` discards ``.cleaned`` files and completes
``.swap`` ones. Compaction is not truncation: nothing goes to quarantine, but every pass
is logged with what it removed. Old segments' file handles close after
``file.delete.delay.ms``, so a fetch already handed a slice of one can still send it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field

from epochlog.protocol.batch import HEADER_SIZE, BatchHeader, read_header
from epochlog.protocol.records import Record, build_batch, iter_records
from epochlog.seams import Clock, Disk
from epochlog.seams.tasks import Step, drain
from epochlog.storage.log_view import LogView
from epochlog.storage.segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
    remove_data_file,
    segment_name,
)

CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
MAX_RELATIVE_OFFSET = 0x7FFFFFFF
# Kafka sizes its offset map in bytes at 24 per entry (16-byte hash, 8-byte offset).
_BYTES_PER_MAP_ENTRY = 24

logger = logging.getLogger("epochlog.storage")


@dataclass
class CleanerStats:
    """What one pass over one log did (logged, and returned for tests and operators)."""

    segments_before: int = 0
    segments_after: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    keys: int = 0
    records_removed: int = 0
    tombstones_removed: int = 0
    first_offset: int = 0
    end_offset: int = 0


@dataclass
class _Plan:
    """The segments a pass will rewrite, and the offset map over its dirty part."""

    segments: list[LogSegment]
    latest: dict[bytes, int]
    dirty_end: int = 0
    groups: list[list[LogSegment]] = field(default_factory=list)
    # producer id -> (first, last) offsets of its aborted transactions
    aborted: dict[int, list[tuple[int, int]]] = field(default_factory=dict)


def cleanable_segments(log: LogView, upper_bound: int) -> list[LogSegment]:
    """Sealed segments that end at or below ``upper_bound`` (the high watermark)."""
    out = []
    for segment in log.segments[:-1]:
        if segment.next_offset > upper_bound:
            break
        out.append(segment)
    return out


def dirty_ratio(log: LogView, first_dirty: int, upper_bound: int) -> float:
    """Bytes of cleanable segments after ``first_dirty`` over all cleanable bytes."""
    segments = cleanable_segments(log, upper_bound)
    total = sum(s.size for s in segments)
    dirty = sum(s.size for s in segments if s.next_offset > first_dirty)
    return dirty / total if total else 0.0


Aborted = dict[int, list[tuple[int, int]]]


def aborted_ranges(log: LogView) -> Aborted:
    """Producer id -> (first, last) offsets of its aborted transactions (.txnindex)."""
    out: Aborted = {}
    for segment in log.segments:
        for t in segment.txn_index.entries:
            out.setdefault(t.producer_id, []).append((t.first_offset, t.last_offset))
    return out


def _is_aborted(header: BatchHeader, aborted: Aborted) -> bool:
    if not header.is_transactional:
        return False
    ranges = aborted.get(header.producer_id, ())
    return any(first <= header.base_offset <= last for first, last in ranges)


def _records(
    segment: LogSegment, aborted: Aborted | None = None
) -> Iterator[tuple[int, BatchHeader, list[Record] | None]]:
    """(position, header, records) of each batch; control batches and batches of
    aborted transactions have none: they are kept whole and never supersede a record
    (an aborted value must not make a committed one of its key disappear)."""
    for position, header in segment.iter_headers():
        if header.is_control or (aborted and _is_aborted(header, aborted)):
            yield position, header, None
            continue
        data = segment.file.pread(header.size, position)
        yield position, header, list(iter_records(data, check_crc=False))


def written_ms(segment: LogSegment, header: BatchHeader) -> int:
    """When a batch was written, as far as the log can tell through the seams: its max
    timestamp (what time retention judges by too), else its segment's creation."""
    return header.max_timestamp if header.max_timestamp >= 0 else segment.created_ms


def _intact(log: LogView, planned: list[tuple[LogSegment, int]]) -> bool:
    """Are the planned (segment, size) pairs all still the log's sealed segments, as
    large as when planned? A cut or a deletion changes one of them."""
    sealed = log.segments[:-1]
    return all(
        any(s is segment for s in sealed) and segment.size == size for segment, size in planned
    )


class LogCleaner:
    """Cleans one log at a time, in steps (``clean_steps``): between them appends go on
    (to the active segment, never cleaned), and a pass whose planned segments were cut or
    deleted meanwhile stops before its next swap. A swap itself is never interrupted."""

    def __init__(
        self,
        disk: Disk,
        clock: Clock,
        dedupe_buffer_bytes: int = 128 * 1024 * 1024,
        file_delete_delay_ms: int = 60_000,
    ) -> None:
        self.disk = disk
        self.clock = clock
        self.resize(dedupe_buffer_bytes)
        self.file_delete_delay_ms = file_delete_delay_ms
        self._retired: list[tuple[int, list[LogSegment]]] = []

    def resize(self, dedupe_buffer_bytes: int) -> None:
        """``log.cleaner.dedupe.buffer.size``: how many keys one pass may map."""
        self.max_keys = max(dedupe_buffer_bytes // _BYTES_PER_MAP_ENTRY, 1)

    # -- planning ----------------------------------------------------------------------

    def _plan(
        self, log: LogView, first_dirty: int, upper_bound: int
    ) -> Generator[Step, None, _Plan | None]:
        segments = cleanable_segments(log, upper_bound)
        sizes = [s.size for s in segments]
        dirty = [i for i, s in enumerate(segments) if s.next_offset > first_dirty]
        if not dirty:
            return None
        latest: dict[bytes, int] = {}
        last = dirty[0]
        aborted = aborted_ranges(log)
        for i in dirty:
            for _, _, records in _records(segments[i], aborted):
                for record in records or ():
                    if record.key is not None:
                        latest[bytes(record.key)] = record.offset
                yield
            last = i
            if len(latest) >= self.max_keys:
                break
        chosen = segments[: last + 1]
        if not _intact(log, list(zip(chosen, sizes[: len(chosen)], strict=True))):  # cut meanwhile
            return None
        plan = _Plan(chosen, latest, dirty_end=log.segments[len(chosen)].base_offset)
        plan.aborted = aborted
        plan.groups = self._group(chosen, log.config.segment_bytes)
        return plan

    @staticmethod
    def _group(segments: list[LogSegment], max_bytes: int) -> list[list[LogSegment]]:
        """Consecutive segments whose total size and offset span fit one segment."""
        groups: list[list[LogSegment]] = []
        for segment in segments:
            current = groups[-1] if groups else None
            if (
                current is not None
                and sum(s.size for s in current) + segment.size <= max_bytes
                and segment.next_offset - current[0].base_offset <= MAX_RELATIVE_OFFSET
            ):
                current.append(segment)
            else:
                groups.append([segment])
        return groups

    # -- cleaning ----------------------------------------------------------------------

    def clean(
        self, log: LogView, first_dirty: int, upper_bound: int, now_ms: int
    ) -> tuple[CleanerStats, int] | None:
        """``clean_steps`` at once."""
        return drain(self.clean_steps(log, first_dirty, upper_bound, now_ms))

    def clean_steps(
        self, log: LogView, first_dirty: int, upper_bound: int, now_ms: int
    ) -> Generator[Step, None, tuple[CleanerStats, int] | None]:
        """Compact ``log`` below ``upper_bound``, pausing after each batch read; returns
        the stats and the new first dirty offset, or None when there was nothing dirty
        to clean or the log changed under the pass (its planned segments cut or
        deleted: the keys mapped from them may no longer be the latest)."""
        plan = yield from self._plan(log, first_dirty, upper_bound)
        if plan is None:
            return None
        planned = [(s, s.size) for s in plan.segments]
        stats = CleanerStats(
            segments_before=len(plan.segments),
            bytes_before=sum(s.size for s in plan.segments),
            keys=len(plan.latest),
            first_offset=plan.segments[0].base_offset,
            end_offset=plan.dirty_end,
        )
        horizon = now_ms - log.config.delete_retention_ms
        retired: list[LogSegment] = []
        for group in plan.groups:
            # A truncation cuts from the end, retention from the start: either way one
            # of the planned segments not yet swapped shows it.
            remaining = planned[len(retired) :]
            new = yield from self._clean_group(
                log, group, plan, horizon, stats, lambda left=remaining: _intact(log, left)
            )
            if new is None:
                logger.info(
                    "%s-%d: the log changed while it was cleaned; this pass stops",
                    log.topic,
                    log.partition,
                )
                break
            stats.segments_after += 1
            stats.bytes_after += new.size
            log.replace_segments(group, new)
            retired.extend(group)
        self._retired.append((now_ms + self.file_delete_delay_ms, retired))
        if len(retired) < len(plan.segments):
            return None
        logger.info(
            "%s-%d: cleaned offsets %d..%d: %d segments (%d bytes) -> %d segments "
            "(%d bytes), %d keys, %d records removed of which %d tombstones",
            log.topic,
            log.partition,
            stats.first_offset,
            stats.end_offset - 1,
            stats.segments_before,
            stats.bytes_before,
            stats.segments_after,
            stats.bytes_after,
            stats.keys,
            stats.records_removed,
            stats.tombstones_removed,
        )
        return stats, plan.dirty_end

    def _clean_group(
        self,
        log: LogView,
        group: list[LogSegment],
        plan: _Plan,
        horizon: int,
        stats: CleanerStats,
        unchanged: Callable[[], bool],
    ) -> Generator[Step, None, LogSegment | None]:
        """Write the group's survivors to ``.cleaned`` (pausing after each batch), then,
        if the log is ``unchanged``, swap it in at once; None (and no swap) if not."""
        base = group[0].base_offset
        stem = f"{log.directory}/{segment_name(base)}"
        cleaned = stem + LOG_SUFFIX + CLEANED_SUFFIX
        if self.disk.exists(cleaned):
            self.disk.remove(cleaned)
        out = self.disk.open(cleaned)
        try:
            for segment in group:
                for position, header, records in _records(segment, plan.aborted):
                    drop_tombstones = written_ms(segment, header) < horizon
                    for piece in self._survivors(
                        segment, position, header, records, plan.latest, drop_tombstones, stats
                    ):
                        out.append(piece)
                    yield None
            yield out.fsync  # megabytes: off the loop
        finally:
            out.close()
        if not unchanged():
            self.disk.remove(cleaned)
            return None
        # From here to the log's replace_segments, nothing pauses.
        swap = stem + LOG_SUFFIX + SWAP_SUFFIX
        self.disk.rename(cleaned, swap)
        # The group's aborted transactions move to the new segment's index.
        aborted_txns = [t for segment in group for t in segment.txn_index.entries]
        for segment in group:
            indexes = (segment.offset_index, segment.time_index, segment.txn_index)
            for path in (index.path for index in indexes):
                if self.disk.exists(path):
                    self.disk.remove(path)
            # The data file (large) aside now, removed off the loop (deferred_deletes.py);
            # reads already handed its descriptor go on until it is closed.
            remove_data_file(self.disk, segment.log_path, log.delete_later)
        self.disk.rename(swap, stem + LOG_SUFFIX)
        new = LogSegment(
            self.disk, log.directory, base, log.config.index_interval_bytes, group[0].created_ms
        )
        bad = new.recover(lambda _position, _header: None)
        if bad is not None:
            raise RuntimeError(f"{new.log_path}: cleaned segment unreadable: {bad.reason}")
        for txn in aborted_txns:
            new.txn_index.append(txn)
        new.seal()
        return new

    @staticmethod
    def _survivors(
        segment: LogSegment,
        position: int,
        header: BatchHeader,
        records: list[Record] | None,
        latest: dict[bytes, int],
        drop_tombstones: bool,
        stats: CleanerStats,
    ) -> Iterator[bytes]:
        """The bytes to keep of one batch: the batch itself when all of it survives,
        else one new batch per run of consecutive surviving records."""
        if records is None:
            yield segment.file.pread(header.size, position)
            return
        keep = []
        for record in records:
            key = record.key
            superseded = key is not None and latest.get(bytes(key), -1) > record.offset
            # A record without a key cannot be superseded; it stays (a topic switched to
            # compact after it was written). Kafka drops them; keeping loses nothing.
            expired = key is not None and record.value is None and drop_tombstones
            if superseded or expired:
                stats.records_removed += 1
                stats.tombstones_removed += record.value is None
            keep.append(not (superseded or expired))
        if all(keep):
            yield segment.file.pread(header.size, position)
            return
        run: list[Record] = []
        for record, kept in zip(records, keep, strict=True):
            if kept and run and record.offset != run[-1].offset + 1:
                yield _rebuild(header, run)
                run = []
            if kept:
                run.append(record)
            elif run:
                yield _rebuild(header, run)
                run = []
        if run:
            yield _rebuild(header, run)

    # -- handles of replaced segments ----------------------------------------------------

    def close_retired(self, now_ms: int, force: bool = False) -> None:
        """Close old segments' files once no fetch can still be sending from them."""
        keep = []
        for due, segments in self._retired:
            if force or now_ms >= due:
                for segment in segments:
                    segment.close()
            else:
                keep.append((due, segments))
        self._retired = keep


def _rebuild(header: BatchHeader, run: list[Record]) -> bytes:
    """A run of surviving records as a batch with the original batch's fields; the
    base sequence moves with the first record so each record keeps its sequence."""
    sequence = header.base_sequence
    if sequence >= 0:
        sequence = (sequence + run[0].offset - header.base_offset) & 0x7FFFFFFF
    return build_batch(
        run,
        base_offset=run[0].offset,
        compression=header.compression,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=sequence,
        partition_leader_epoch=header.partition_leader_epoch,
        is_transactional=header.is_transactional,
        timestamp_type_log_append=header.is_log_append_time,
    )


def finish_interrupted_swaps(disk: Disk, directory: str) -> None:
    """Recovery of a cleaning cut short: drop ``.cleaned`` files (the swap had not
    begun), and complete each ``.swap``: old segments it covers go, then it is renamed."""
    names = disk.listdir(directory)
    for name in names:
        if name.endswith(CLEANED_SUFFIX):
            logger.warning("%s/%s: discarding an unfinished cleaning", directory, name)
            disk.remove(f"{directory}/{name}")
    for name in names:
        if not name.endswith(LOG_SUFFIX + SWAP_SUFFIX):
            continue
        stem = name[: -len(LOG_SUFFIX + SWAP_SUFFIX)]
        if len(stem) != 20 or not stem.isdigit():
            continue
        base = int(stem)
        swap = f"{directory}/{name}"
        end = _next_offset_of(disk, swap, base)
        for other in disk.listdir(directory):
            other_stem, dot, suffix = other.partition(".")
            if not (len(other_stem) == 20 and other_stem.isdigit()):
                continue
            if base <= int(other_stem) < max(end, base + 1) and f".{suffix}" in (
                LOG_SUFFIX,
                INDEX_SUFFIX,
                TIME_INDEX_SUFFIX,
            ):
                disk.remove(f"{directory}/{other}")
        disk.rename(swap, f"{directory}/{stem}{LOG_SUFFIX}")
        logger.warning(
            "%s: completed an interrupted cleaning swap (offsets %d..%d)", swap, base, end - 1
        )


def _next_offset_of(disk: Disk, path: str, base: int) -> int:
    """The offset after the last batch of a (fsynced, so whole) swap file."""
    handle = disk.open(path)
    try:
        size = handle.size()
        position, end = 0, base
        while position + HEADER_SIZE <= size:
            header = read_header(handle.pread(HEADER_SIZE, position))
            end = header.next_offset
            position += header.size
        return end
    finally:
        handle.close()
