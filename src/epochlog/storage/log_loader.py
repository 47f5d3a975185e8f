"""Opening a partition's log: find segments, recover what may be torn, rebuild state.

A log cleaner's swap cut short by a crash is finished or discarded first. Unless the
broker shut down cleanly, every batch after the recovery point is re-validated
(structure and CRC32C). A bad batch followed by good ones that run to the end of its
segment (or a bad tail with a later segment after it) becomes a hole: only its bytes go
to quarantine and the rest of the log stays (``storage/log_holes.py``; whether a replica
fills it or the log is cut there is decided once the partition's role is known).
Otherwise the first bad batch and everything after it is cut, its bytes kept in
quarantine, and exactly what was cut is logged (``storage/damage.py``, shared with
damage found later by a read). Indexes of recovered segments, and any index failing its
sanity check, are rebuilt from the log.
"""

from __future__ import annotations

import bisect
import logging
from dataclasses import dataclass

from epochlog.protocol.batch import BatchHeader
from epochlog.protocol.errors import KafkaError
from epochlog.seams import Clock, Disk
from epochlog.storage.cleaner import finish_interrupted_swaps
from epochlog.storage.damage import quarantine_damaged_tail
from epochlog.storage.epoch_cache import CHECKPOINT_FILE, LeaderEpochCache
from epochlog.storage.index import IndexCorrupt
from epochlog.storage.log_holes import LogHoles, open_hole
from epochlog.storage.quarantine import Quarantine
from epochlog.storage.segment import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    TIME_INDEX_SUFFIX,
    BadTail,
    DamagedBatch,
    LogSegment,
    parse_segment_name,
    segment_name,
)
from epochlog.storage.txn_index import TXN_INDEX_SUFFIX

logger = logging.getLogger("epochlog.storage")


@dataclass
class LoadedLog:
    segments: list[LogSegment]
    epoch_cache: LeaderEpochCache
    log_start_offset: int
    recovery_point: int
    holes: LogHoles


class LogLoader:
    def __init__(
        self,
        disk: Disk,
        clock: Clock,
        directory: str,
        index_interval_bytes: int,
        quarantine: Quarantine,
    ) -> None:
        self.disk = disk
        self.clock = clock
        self.directory = directory
        self.index_interval_bytes = index_interval_bytes
        self.quarantine = quarantine

    def _new_segment(self, base_offset: int) -> LogSegment:
        return LogSegment(
            self.disk,
            self.directory,
            base_offset,
            self.index_interval_bytes,
            self.clock.time_ms(),
        )

    def load(self, recovery_point: int, log_start_offset: int, clean_shutdown: bool) -> LoadedLog:
        self.disk.makedirs(self.directory)
        finish_interrupted_swaps(self.disk, self.directory)
        bases = self._scan_directory()
        epoch_cache, epochs_ok = self._open_epoch_cache()
        segments: list[LogSegment] = []
        holes = LogHoles()
        for i, base in enumerate(bases):
            stem = f"{self.directory}/{segment_name(base)}"
            indexes_present = self.disk.exists(stem + INDEX_SUFFIX) and self.disk.exists(
                stem + TIME_INDEX_SUFFIX
            )
            segment = self._new_segment(base)
            segments.append(segment)
            next_base = bases[i + 1] if i + 1 < len(bases) else None
            below_recovery = next_base is not None and next_base <= recovery_point
            needs_recovery = not (clean_shutdown or below_recovery)
            if not needs_recovery and (indexes_present or segment.size == 0):
                try:
                    segment.load_state()
                    continue
                except (IndexCorrupt, KafkaError) as exc:
                    logger.warning("%s: rebuilding indexes: %s", segment.log_path, exc)
            if self._recover_segment(segment, bases[i + 1 :], epoch_cache, holes):
                break
        if not segments:
            segments.append(self._new_segment(log_start_offset))
        log_end = segments[-1].next_offset
        if segments[-1].size == 0 and len(segments) > 1:
            log_end = max(log_end, segments[-2].next_offset)
        log_start = max(log_start_offset, segments[0].base_offset)
        if epochs_ok:
            disagreement = _epochs_disagree(epoch_cache, segments, log_end)
            if disagreement is not None:
                logger.warning(
                    "%s/%s disagrees with the batches (%s): rebuilding it from the log",
                    self.directory,
                    CHECKPOINT_FILE,
                    disagreement,
                )
                epoch_cache.clear()
                epochs_ok = False
        if not epochs_ok:
            self._rebuild_epochs(segments, epoch_cache)
            log_end = segments[-1].next_offset
            if segments[-1].size == 0 and len(segments) > 1:
                log_end = max(log_end, segments[-2].next_offset)
        epoch_cache.truncate_from_end(log_end)
        epoch_cache.truncate_from_start(log_start)
        for segment in segments[:-1]:
            segment.seal()
        segments[-1].activate()
        point = log_end if clean_shutdown else min(recovery_point, log_end)
        return LoadedLog(segments, epoch_cache, log_start, point, holes)

    def _rebuild_epochs(self, segments: list[LogSegment], epoch_cache: LeaderEpochCache) -> None:
        """Every batch header's epoch; a header that does not parse cuts the log there."""
        for index, segment in enumerate(segments):
            try:
                for _, header in segment.iter_headers():
                    epoch_cache.assign(header.partition_leader_epoch, header.base_offset)
            except DamagedBatch as damage:
                quarantine_damaged_tail(
                    self.quarantine, segments, index, damage.position, damage.reason, "startup"
                )
                for dropped in segments[index + 1 :]:
                    dropped.delete()
                del segments[index + 1 :]
                segment.cut_at(damage.position)
                return

    def _scan_directory(self) -> list[int]:
        """Base offsets of the segments present; leftovers of interrupted writes removed."""
        names = self.disk.listdir(self.directory)
        bases = sorted(b for b in (parse_segment_name(n) for n in names) if b is not None)
        logs = {segment_name(b) for b in bases}
        for name in names:
            if name.endswith((".tmp", DELETED_SUFFIX)) or (
                name.endswith((INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX))
                and name.rsplit(".", 1)[0] not in logs
            ):
                self.disk.remove(f"{self.directory}/{name}")
        return bases

    def _open_epoch_cache(self) -> tuple[LeaderEpochCache, bool]:
        path = f"{self.directory}/{CHECKPOINT_FILE}"
        try:
            return LeaderEpochCache(self.disk, path), self.disk.exists(path)
        except ValueError as exc:
            logger.warning("%s: rebuilding leader epoch cache from the log: %s", path, exc)
            self.disk.remove(path)
            return LeaderEpochCache(self.disk, path), False

    def _recover_segment(
        self,
        segment: LogSegment,
        later_bases: list[int],
        epoch_cache: LeaderEpochCache,
        holes: LogHoles,
    ) -> bool:
        """Re-validate one segment; a bad batch becomes a hole if the good batches after
        it are found, otherwise the log is cut there (it, the rest of the segment and
        every later segment go to quarantine). True if it cut."""

        def on_batch(_position: int, header: BatchHeader) -> None:
            epoch_cache.assign(header.partition_leader_epoch, header.base_offset)

        def resume(bad: BadTail) -> int | None:
            following = later_bases[0] if later_bases else None
            hole = open_hole(
                self.quarantine,
                segment,
                bad.position,
                segment.next_offset,
                following,
                bad.reason,
                "recovery",
            )
            if hole is None:
                return None
            holes.add(hole)
            return hole.end_position

        bad = segment.recover(on_batch, resume)
        if bad is None:
            return False
        later = [self._new_segment(base) for base in later_bases]
        quarantine_damaged_tail(
            self.quarantine,
            [segment, *later],
            0,
            bad.position,
            bad.reason,
            "recovery",
            logging.WARNING,
        )
        for dropped in later:
            dropped.delete()
        segment.cut_at(bad.position)
        return True


def _epochs_disagree(
    epoch_cache: LeaderEpochCache, segments: list[LogSegment], log_end: int
) -> str | None:
    """Why a well-formed checkpoint is wrong, or None: each epoch's first and last
    batch must carry that epoch (checked through the index, a few reads per epoch)."""
    entries = epoch_cache.entries()
    bases = [s.base_offset for s in segments]

    def epoch_at(offset: int) -> int | None:
        segment = segments[max(0, bisect.bisect_right(bases, offset) - 1)]
        found = segment.find_batch(offset)
        if found is None or found[1].base_offset > offset:
            return None
        return found[1].partition_leader_epoch

    try:
        for i, (epoch, start) in enumerate(entries):
            end = entries[i + 1][1] if i + 1 < len(entries) else log_end
            if start >= log_end:
                break
            first, last = epoch_at(start), epoch_at(min(end, log_end) - 1)
            if first is not None and first != epoch:
                return f"epoch {epoch} from offset {start}, but that batch has epoch {first}"
            if last is not None and last != epoch:
                return f"epoch {epoch} up to offset {end - 1}, but that batch has epoch {last}"
    except DamagedBatch as damage:
        return str(damage)
    return None
