"""Opening a partition's log: find segments, recover what may be torn, rebuild state.

A log cleaner's swap cut short by a crash is finished or discarded first. Unless the
broker shut down cleanly, every batch after the recovery point is re-validated
(structure and CRC32C). The first bad batch and everything after it is cut, its bytes
kept in quarantine, and exactly what was cut is logged. Indexes of recovered segments,
and any index failing its sanity check, are rebuilt from the log.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from epochlog.protocol.batch import HEADER_SIZE, BatchHeader, read_header
from epochlog.protocol.errors import KafkaError
from epochlog.seams import Clock, Disk
from epochlog.storage.cleaner import finish_interrupted_swaps
from epochlog.storage.epoch_cache import CHECKPOINT_FILE, LeaderEpochCache
from epochlog.storage.index import IndexCorrupt
from epochlog.storage.quarantine import Quarantine
from epochlog.storage.segment import (
    INDEX_SUFFIX,
    TIME_INDEX_SUFFIX,
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
            if self._recover_segment(segment, epoch_cache):
                # Cut inside this segment: later segments cannot follow a hole.
                for later in bases[i + 1 :]:
                    self._quarantine_whole_segment(later, "follows a corrupt segment")
                break
        if not segments:
            segments.append(self._new_segment(log_start_offset))
        log_end = segments[-1].next_offset
        if segments[-1].size == 0 and len(segments) > 1:
            log_end = max(log_end, segments[-2].next_offset)
        log_start = max(log_start_offset, segments[0].base_offset)
        if not epochs_ok:
            for segment in segments:
                for _, header in segment.iter_headers():
                    epoch_cache.assign(header.partition_leader_epoch, header.base_offset)
        epoch_cache.truncate_from_end(log_end)
        epoch_cache.truncate_from_start(log_start)
        for segment in segments[:-1]:
            segment.seal()
        segments[-1].activate()
        point = log_end if clean_shutdown else min(recovery_point, log_end)
        return LoadedLog(segments, epoch_cache, log_start, point)

    def _scan_directory(self) -> list[int]:
        """Base offsets of the segments present; leftovers of interrupted writes removed."""
        names = self.disk.listdir(self.directory)
        bases = sorted(b for b in (parse_segment_name(n) for n in names) if b is not None)
        logs = {segment_name(b) for b in bases}
        for name in names:
            if name.endswith(".tmp") or (
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

    def _recover_segment(self, segment: LogSegment, epoch_cache: LeaderEpochCache) -> bool:
        """Re-validate one segment; cut and quarantine a bad tail. True if it cut."""

        def on_batch(_position: int, header: BatchHeader) -> None:
            epoch_cache.assign(header.partition_leader_epoch, header.base_offset)

        bad = segment.recover(on_batch)
        if bad is None:
            return False
        size = segment.size
        first_offset = segment.next_offset
        last_offset = self._guess_last_offset(segment, bad.position)
        path = self.quarantine.keep(
            f"{first_offset:020d}-recovery-{segment_name(segment.base_offset)}-{bad.position}",
            [(segment.file, bad.position, size - bad.position)],
            {
                "reason": f"recovery: {bad.reason}",
                "segment": segment.log_path,
                "position": bad.position,
                "first_offset": first_offset,
                "last_offset_claimed": last_offset,
            },
        )
        logger.warning(
            "recovery cut %s at position %d (%d bytes; offsets from %d, last claimed %s): "
            "%s; bytes kept in %s",
            segment.log_path,
            bad.position,
            size - bad.position,
            first_offset,
            last_offset,
            bad.reason,
            path,
        )
        segment.cut_at(bad.position)
        return True

    def _guess_last_offset(self, segment: LogSegment, position: int) -> int | None:
        """The last offset the bad batch's header claims, if its header still parses."""
        try:
            return read_header(segment.file.pread(HEADER_SIZE, position)).last_offset
        except KafkaError:
            return None

    def _quarantine_whole_segment(self, base: int, reason: str) -> None:
        stem = f"{self.directory}/{segment_name(base)}"
        segment = self._new_segment(base)
        size = segment.size
        path = self.quarantine.keep(
            f"{base:020d}-recovery-segment",
            [(segment.file, 0, size)],
            {"reason": f"recovery: {reason}", "segment": segment.log_path, "first_offset": base},
        )
        logger.warning(
            "recovery removed segment %s (%d bytes from offset %d): %s; bytes kept in %s",
            stem,
            size,
            base,
            reason,
            path,
        )
        segment.delete()
