"""One partition's log: ``<log.dir>/<topic>-<partition>/`` of segments and state.

The broker appends produced or replicated batches, reads whole batches as file slices
for zero-copy sends, answers ListOffsets and OffsetsForLeaderEpoch, truncates when a
follower diverges and deletes old segments for retention. Nothing removed by truncation
is destroyed: it is moved to ``quarantine/`` first.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Callable

from epochlog.protocol.batch import (
    BatchHeader,
    WritableBatches,
    iter_batches,
    patch_log_append_time,
    patch_offset_and_epoch,
    read_header,
)
from epochlog.protocol.errors import ErrorCode, KafkaError
from epochlog.protocol.record_validation import RecordValidator, default_validator
from epochlog.seams import Clock, Disk
from epochlog.storage.append_rules import check_batches, check_timestamps, recompressed
from epochlog.storage.config import LogConfig
from epochlog.storage.damage import DamageCut
from epochlog.storage.epoch_cache import LeaderEpochCache
from epochlog.storage.log_damage import damage_found, fill_hole, holes_for_missing_offsets
from epochlog.storage.log_holes import Hole, LogHoles
from epochlog.storage.log_loader import LogLoader
from epochlog.storage.log_reader import LogReader
from epochlog.storage.log_transactions import markers_of, rebuild_producer_state, replay_written
from epochlog.storage.partition_metadata import PartitionMetadataFile
from epochlog.storage.producer_state import AppendOrigin, ProducerStateManager, VerificationGuard
from epochlog.storage.quarantine import Quarantine, keep_tail
from epochlog.storage.results import AppendResult, OffsetAndEpoch, ReadResult, TruncatedRange
from epochlog.storage.retention import deletable_count
from epochlog.storage.rolled_segments import RolledSegments
from epochlog.storage.segment import DamagedBatch, DeleteLater, LogSegment

MAX_RELATIVE_OFFSET = 0x7FFFFFFF
NO_TIMESTAMP = -1

logger = logging.getLogger("epochlog.storage")


class UnexpectedAppendOffset(KafkaError):
    """A follower append that does not start at or after the log end."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.UNKNOWN_SERVER_ERROR, message)


class Log:
    """Segments plus the leader-epoch cache, producer state and offsets of a partition."""

    def __init__(
        self,
        disk: Disk,
        clock: Clock,
        directory: str,
        topic: str,
        partition: int,
        config: LogConfig,
        segments: list[LogSegment],
        epoch_cache: LeaderEpochCache,
        log_start_offset: int,
        recovery_point: int,
        validator: RecordValidator | None = None,
        holes: LogHoles | None = None,
        offset_floor: int = 0,
    ) -> None:
        self.disk = disk
        self.clock = clock
        self.directory = directory
        self.topic = topic
        self.partition = partition
        self._config = config
        self._roll_after = (-1, 0)  # (active segment's base, its roll age): hashed once
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        self._epoch_cache = epoch_cache
        self._log_start_offset = log_start_offset
        self._recovery_point = recovery_point
        self._validator = validator or default_validator()
        # What damage found on disk removed in this run (such a log is CRC-checked on
        # every read from then on).
        self.damage_cuts: list[DamageCut] = []
        # Offsets this log lacks below its end, never read (``storage/log_holes.py``).
        self.holes = holes if holes is not None else LogHoles()
        # No offset below this is ever assigned again: the highest log end this replica
        # reached (durable in ``next-offset-floor-checkpoint``), lowered only by a
        # truncation to a leader's log.
        self._offset_floor = offset_floor
        self.quarantine = Quarantine(disk, clock, directory)
        self.producer_state = ProducerStateManager(disk, directory)
        self._reader = LogReader(self)
        self._unflushed_messages = 0
        self._last_flush_ms = clock.time_ms()
        # Sealed by a roll, not fsynced yet; whoever runs ``flush_rolled`` is told.
        self._rolled = RolledSegments()
        self.on_roll: Callable[[Log], None] | None = None
        self.delete_later: DeleteLater | None = None  # removals run off the loop
        self._metadata_file = PartitionMetadataFile(disk, directory)
        self._topic_id = self._metadata_file.read()
        self._closed = False

    # -- opening -----------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        disk: Disk,
        clock: Clock,
        directory: str,
        topic: str,
        partition: int,
        config: LogConfig,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        clean_shutdown: bool = False,
        validator: RecordValidator | None = None,
        offset_floor: int = 0,
    ) -> Log:
        """Load (and unless shut down cleanly, recover) the partition in ``directory``;
        offsets below ``offset_floor`` that no segment holds become holes."""
        quarantine = Quarantine(disk, clock, directory)
        loaded = LogLoader(disk, clock, directory, config.index_interval_bytes, quarantine).load(
            recovery_point, log_start_offset, clean_shutdown
        )
        log = cls(
            disk,
            clock,
            directory,
            topic,
            partition,
            config,
            loaded.segments,
            loaded.epoch_cache,
            loaded.log_start_offset,
            loaded.recovery_point,
            validator,
            loaded.holes,
            offset_floor,
        )
        holes_for_missing_offsets(log, "startup")
        try:
            rebuild_producer_state(log)
        except DamagedBatch as damage:
            log.damage_found(damage, "a damaged header found at startup")
        return log

    # -- properties --------------------------------------------------------------------

    @property
    def config(self) -> LogConfig:
        return self._config

    @config.setter
    def config(self, config: LogConfig) -> None:
        self._config = config
        self._roll_after = (-1, 0)
        self.active_segment.index_interval_bytes = config.index_interval_bytes

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def offset_floor(self) -> int:
        """The lowest offset a leader of this log may assign next."""
        return max(self._offset_floor, self.log_end_offset)

    @property
    def recovery_point(self) -> int:
        return self.holes.recovery_point(self._recovery_point)

    @property
    def epoch_cache(self) -> LeaderEpochCache:
        return self._epoch_cache

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def segments(self) -> list[LogSegment]:
        return list(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    def segment_for(self, offset: int) -> int:
        """Index of the segment whose range holds ``offset`` (the floor by base offset)."""
        return max(bisect.bisect_right(self._bases, offset) - 1, 0)

    # -- appending ---------------------------------------------------------------------

    def append_as_leader(
        self,
        records: WritableBatches,
        leader_epoch: int,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        guard: VerificationGuard | None = None,
    ) -> AppendResult:
        """Validate, assign offsets and epoch, and write a produced record set (or, from
        a coordinator, transaction markers); ``guard``: ``producer_state``'s, if verified."""
        now = self.clock.time_ms()
        config = self._config
        batches = check_batches(records, config)
        if origin == AppendOrigin.CLIENT:
            self._validator.validate(records, batches, require_keys=config.compact)
            check_timestamps(records, batches, config, now)
            rewritten = recompressed(records, batches, config)
            if rewritten is not records:
                records, batches = rewritten, check_batches(rewritten, config)
        markers = markers_of(records, batches, origin)
        log_append_time = config.log_append_time
        duplicate = self.producer_state.check_append(batches, origin, markers, guard)
        if duplicate is not None:
            append_time = duplicate.max_timestamp if log_append_time else -1
            return AppendResult(
                duplicate.base_offset,
                duplicate.last_offset,
                append_time,
                self._log_start_offset,
                duplicate=True,
            )
        next_offset = self.log_end_offset
        headers = []
        for position, header in batches:
            patched = patch_offset_and_epoch(records, position, header, next_offset, leader_epoch)
            if log_append_time:
                patch_log_append_time(records, position, now)
                patched = read_header(records, position)
            headers.append(patched)
            next_offset = patched.base_offset + patched.last_offset_delta + 1
        self._write(records, headers, now)
        self._epoch_cache.assign(leader_epoch, headers[0].base_offset)
        replay_written(self, batches, headers, markers)  # the producers' state follows
        return AppendResult(
            headers[0].base_offset,
            next_offset - 1,
            now if log_append_time else NO_TIMESTAMP,
            self._log_start_offset,
        )

    def append_as_follower(self, records: bytearray) -> AppendResult:
        """Write batches the leader already numbered; learn epochs from their headers."""
        batches = iter_batches(records)
        markers = markers_of(records, batches, AppendOrigin.COORDINATOR)
        expected = self.log_end_offset
        headers = []
        for _, header in batches:
            if header.base_offset < expected:
                raise UnexpectedAppendOffset(
                    f"{self.topic}-{self.partition}: batch at offset {header.base_offset} "
                    f"but log end is {expected}"
                )
            expected = header.next_offset
            headers.append(header)
        self._write(records, headers, self.clock.time_ms())
        for header in headers:
            self._epoch_cache.assign(header.partition_leader_epoch, header.base_offset)
        replay_written(self, batches, headers, markers)
        return AppendResult(
            headers[0].base_offset,
            headers[-1].last_offset,
            NO_TIMESTAMP,
            self._log_start_offset,
        )

    def maybe_assign_epoch_start_offset(self, leader_epoch: int, start_offset: int) -> None:
        """A new leader records where its epoch starts before any append (Kafka's
        ``maybeAssignEpochStartOffset``)."""
        self._epoch_cache.assign(leader_epoch, start_offset)

    def _write(self, records: WritableBatches, headers: list[BatchHeader], now_ms: int) -> None:
        self._maybe_roll_for(len(records), headers, now_ms)
        self.active_segment.append(records, headers)
        self._unflushed_messages += sum(h.records_count for h in headers)
        if self._unflushed_messages >= self._config.flush_messages:
            self.flush()

    def _maybe_roll_for(self, size: int, headers: list[BatchHeader], now_ms: int) -> None:
        active = self.active_segment
        if active.size == 0:
            if headers[0].base_offset != active.base_offset:
                # A follower's first batch after a gap, or a truncated start.
                self._replace_empty_active(headers[0].base_offset)
            return
        too_big = active.size + size > self._config.segment_bytes
        too_old = (
            active.time_waited_for_roll(now_ms, headers[0].max_timestamp) > self._roll_after_ms()
        )
        too_far = headers[-1].last_offset - active.base_offset > MAX_RELATIVE_OFFSET
        index_full = active.index_full(self._config.segment_index_bytes)
        if too_big or too_old or too_far or index_full:
            self.roll(headers[0].base_offset)

    def _replace_empty_active(self, base_offset: int) -> None:
        old = self._segments.pop()
        self._bases.pop()
        old.delete()
        self._add_segment(base_offset)

    def _add_segment(self, base_offset: int) -> LogSegment:
        segment = LogSegment(
            self.disk,
            self.directory,
            base_offset,
            self._config.index_interval_bytes,
            self.clock.time_ms(),
        )
        segment.activate()
        self._segments.append(segment)
        self._bases.append(base_offset)
        return segment

    def roll(self, base_offset: int | None = None) -> LogSegment:
        """Seal the active segment and start a new one at the log end."""
        new_base = self.log_end_offset if base_offset is None else base_offset
        if self.active_segment.size == 0:
            return self.active_segment
        sealed = self.active_segment
        sealed.seal(flush=False)  # fsynced by flush_rolled (storage/rolled_segments.py)
        self._rolled.add(sealed, self.log_end_offset)
        self.producer_state.take_snapshot(self.log_end_offset)
        segment = self._add_segment(new_base)
        if self.on_roll is not None:
            self.on_roll(self)
        return segment

    def _roll_after_ms(self) -> int:
        base = self.active_segment.base_offset
        if self._roll_after[0] != base:
            key = f"{self.topic}-{self.partition}-{base}"
            self._roll_after = (base, self._config.roll_after_ms(key))
        return self._roll_after[1]

    def maybe_roll(self, now_ms: int) -> bool:
        """Roll by ``segment.ms`` (or ``max.compaction.lag.ms``) when no append came to do it."""
        active = self.active_segment
        # Also require the segment to have been open that long on this clock, so old
        # CreateTime timestamps (mirrored data) cannot make every check roll a segment.
        waited = min(active.time_waited_for_roll(now_ms, None), now_ms - active.created_ms)
        if active.size and waited > self._roll_after_ms():
            self.roll()
            return True
        return False

    # -- reading -----------------------------------------------------------------------

    def read(
        self,
        start_offset: int,
        max_bytes: int,
        max_offset: int | None = None,
        min_one_batch: bool = True,
    ) -> ReadResult:
        """Whole batches from the one holding ``start_offset`` (see LogReader.read)."""
        return self._reader.read(start_offset, max_bytes, max_offset, min_one_batch)

    def offset_for_timestamp(self, timestamp: int) -> OffsetAndEpoch | None:
        return self._reader.offset_for_timestamp(timestamp)

    def earliest(self) -> OffsetAndEpoch:
        start = self._log_start_offset
        return OffsetAndEpoch(start, NO_TIMESTAMP, self._epoch_cache.epoch_for_offset(start))

    def latest(self) -> OffsetAndEpoch:
        return OffsetAndEpoch(self.log_end_offset, NO_TIMESTAMP, self._epoch_cache.latest_epoch)

    def max_timestamp(self) -> OffsetAndEpoch | None:
        return self._reader.max_timestamp()

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest open transaction (None: none is open)."""
        return self.producer_state.first_unstable_offset()

    def collect_aborted_transactions(self, start: int, upper: int) -> list[tuple[int, int]]:
        return self._reader.aborted_transactions(start, upper)

    def end_offset_for_epoch(self, requested_epoch: int) -> tuple[int, int]:
        """OffsetsForLeaderEpoch against this log's end."""
        return self._epoch_cache.end_offset_for(requested_epoch, self.log_end_offset)

    # -- truncation and retention --------------------------------------------------------

    def truncate_to(self, offset: int, reason: str = "truncate") -> TruncatedRange | None:
        """Remove every batch at and after ``offset``, keeping them in quarantine first.

        As in Kafka, a batch containing ``offset`` goes whole, so the log end can end up
        below ``offset``; so does a hole holding ``offset`` (the log ends at its start).
        The log follows a leader's from here: its offset floor falls to its new end.
        Returns what was removed, or None if nothing was.
        """
        if offset >= self.log_end_offset:
            return None
        hole = self.holes.covering(offset)
        if hole is not None:
            offset = hole.first_offset
        if offset < self._log_start_offset:
            return self.truncate_fully_and_start_at(offset, reason)
        index = self.segment_for(offset)
        part = (self.topic, self.partition)
        removed = keep_tail(self.quarantine, self._segments[index:], offset, reason, part)
        target = self._segments[index]
        found = target.find_batch(offset)
        cuts = [found[0]] if found is not None else []
        # Damaged bytes of a hole the truncation removes go too (they are in quarantine).
        cuts += [h.position for h in self.holes if h.segment is target and h.end_offset > offset]
        self.holes.forget_from(offset)
        self.drop_segments_after(index)
        if cuts:
            target.cut_at(min(cuts))
        target.activate()
        self.rebuild_after_truncation()
        self._offset_floor = self.log_end_offset
        return removed

    def truncate_fully_and_start_at(
        self, offset: int, reason: str = "truncate fully"
    ) -> TruncatedRange | None:
        """Empty the log (quarantining its contents) and restart it at ``offset``."""
        removed = None
        if self.log_end_offset > self._log_start_offset:
            removed = keep_tail(
                self.quarantine,
                self._segments[self.segment_for(self._log_start_offset) :],
                self._log_start_offset,
                reason,
                (self.topic, self.partition),
            )
        self.holes.clear()
        for segment in self._segments:
            segment.delete()
        self._segments, self._bases = [], []
        self._add_segment(offset)
        self._log_start_offset = offset
        self._epoch_cache.clear()
        self.producer_state.clear()
        self.producer_state.delete_snapshots()
        self._recovery_point = offset
        self._offset_floor = offset
        return removed

    def damage_found(self, damage: DamagedBatch, context: str) -> None:
        """A damaged batch becomes a hole (``storage/log_damage.py``)."""
        damage_found(self, damage, context)

    def fill_hole(self, hole: Hole, data: bytes) -> bool:
        """A replica's copy of a hole's batches (``storage/log_damage.py``)."""
        return fill_hole(self, hole, data)

    def pin_offset_floor(self) -> None:
        """The log's end so far stays taken, whatever a cut removes next."""
        self._offset_floor = self.offset_floor

    def drop_segments_after(self, index: int) -> None:
        for segment in self._segments[index + 1 :]:
            segment.delete()
        del self._segments[index + 1 :]
        del self._bases[index + 1 :]

    def move_end_to(self, offset: int) -> None:
        """The log goes on at ``offset``, past offsets it does not hold."""
        if self.active_segment.size == 0:
            self._replace_empty_active(offset)
        else:
            self.roll(offset)

    def insert_segment(self, segment: LogSegment) -> None:
        at = bisect.bisect_right(self._bases, segment.base_offset)
        self._segments.insert(at, segment)
        self._bases.insert(at, segment.base_offset)

    def rebuild_after_truncation(self) -> None:
        end = self.log_end_offset
        self._epoch_cache.truncate_from_end(end)
        self._recovery_point = min(self._recovery_point, end)
        rebuild_producer_state(self)

    def delete_segments_for_retention(self, now_ms: int) -> int:
        """Delete old segments (``storage/retention.py`` decides which). Returns how many."""
        deletable = deletable_count(self._segments, self._config, self._log_start_offset, now_ms)
        if deletable:
            self._delete_oldest(deletable)
        return deletable

    def _delete_oldest(self, count: int) -> None:
        gone = self._segments[:count]
        self.holes.forget_where(gone, None)
        del self._segments[:count]
        del self._bases[:count]
        self._log_start_offset = max(self._log_start_offset, self._segments[0].base_offset)
        for segment in gone:
            logger.info("%s-%d: retention deleted segment %s",
                        self.topic, self.partition, segment.log_path)  # fmt: skip
            segment.delete(self.delete_later)
        self._epoch_cache.truncate_from_start(self._log_start_offset)
        self.producer_state.evict_before(self._log_start_offset)
        self.holes.forget_before(self._log_start_offset)

    def replace_segments(self, old: list[LogSegment], new: LogSegment) -> None:
        """Put a cleaned segment in place of the consecutive sealed ``old`` ones (the
        cleaner has already swapped the files); the caller closes ``old`` later."""
        first = self._segments.index(old[0])
        if self._segments[first : first + len(old)] != old or old[-1] is self.active_segment:
            raise ValueError("replace_segments needs consecutive sealed segments of this log")
        self._segments[first : first + len(old)] = [new]
        self._bases = [s.base_offset for s in self._segments]

    def maybe_increment_log_start_offset(self, offset: int) -> None:
        """DeleteRecords: move the log start forward; whole segments go at retention."""
        if offset > self.log_end_offset:
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE, f"{offset} beyond the log end")
        if offset > self._log_start_offset:
            self._log_start_offset = offset
            self._epoch_cache.truncate_from_start(offset)
            self.producer_state.evict_before(offset)
            self.holes.forget_before(offset)

    # -- durability and lifecycle ------------------------------------------------------

    def flush(self) -> None:
        """fsync what was appended; the recovery point moves to the log end."""
        self._rolled.flush_now(self._segments)
        self.active_segment.flush()
        self._recovery_point = self.log_end_offset
        self._unflushed_messages = 0
        self._last_flush_ms = self.clock.time_ms()

    async def flush_rolled(self) -> None:
        """fsync what rolls sealed, off the event loop; the recovery point follows."""
        end = await self._rolled.flush_off_loop(self.disk, self._live_segments)
        if end is not None:
            self._recovery_point = max(self._recovery_point, end)

    def _live_segments(self) -> list[LogSegment]:
        return [] if self._closed else self._segments

    def maybe_flush(self, now_ms: int) -> bool:
        """Flush per ``flush.ms``."""
        if self._recovery_point < self.log_end_offset and (
            now_ms - self._last_flush_ms >= self._config.flush_ms
        ):
            self.flush()
            return True
        return False

    def close(self) -> None:
        """Flush, snapshot producer state, close files (a clean shutdown of this log)."""
        if self._closed:
            return
        self.flush()
        self.active_segment.seal()
        self.producer_state.take_snapshot(self.log_end_offset)
        for segment in self._segments:
            segment.close()
        self._closed = True

    def delete(self) -> None:
        """Rename the directory aside, as Kafka does, then remove it."""
        if not self._closed:
            for segment in self._segments:
                segment.close()
            self._closed = True
        # Unique without id() or randomness (a simulation replays it): the topic id
        # tells a re-created topic's directory apart, the time a second deletion.
        token = f"{self._topic_id or 'none'}.{self.clock.time_ms()}".replace("-", "")
        doomed = f"{self.directory}.{token}-delete"
        self.disk.rename(self.directory, doomed)
        if self.delete_later is None:
            self.disk.rmtree(doomed)
        else:
            self.delete_later(lambda: self.disk.rmtree(doomed))

    # -- topic id ----------------------------------------------------------------------

    @property
    def topic_id(self) -> str | None:
        """The topic's id in Kafka's base64url string form, if recorded."""
        return self._topic_id

    def set_topic_id(self, topic_id: str) -> None:
        """Record the topic id in ``partition.metadata``."""
        if self._topic_id != topic_id:
            self._metadata_file.write(topic_id)
            self._topic_id = topic_id
