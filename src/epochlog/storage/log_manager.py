"""Every partition log of a broker, across its ``log.dirs``.

Loads logs at start (recovering those not shut down cleanly), places new ones, and runs
the periodic work Kafka's LogManager schedules: flush by ``flush.ms``, retention, and
the recovery-point and log-start-offset checkpoints, and the log cleaner for compacted
topics. Only the background loop is async; it sleeps through the Clock seam.

The cleaner compacts a partition only below its high watermark, which storage does not
know: the owner of the partitions supplies it as ``high_watermark(topic, partition)``.
Without that source the cleaner cleans nothing (see ``storage/cleaner.py`` for why).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

from epochlog.protocol.record_validation import RecordValidator
from epochlog.seams import Clock, Disk
from epochlog.seams.tasks import Step, drain, in_steps
from epochlog.settings.broker import BROKER
from epochlog.settings.registry import Settings, bind, bound
from epochlog.storage.checkpoints import (
    LOG_START_OFFSET_CHECKPOINT,
    OFFSET_FLOOR_CHECKPOINT,
    OFFSET_FLOOR_INTERVAL_MS,
    RECOVERY_POINT_CHECKPOINT,
    DirCheckpoints,
    TopicPartition,
    clear_clean_shutdown,
    mark_clean_shutdown,
    was_clean_shutdown,
)
from epochlog.storage.cleaner import CLEANER_CHECKPOINT, LogCleaner
from epochlog.storage.cleaning_pass import cleaning_pass, first_dirty_offset
from epochlog.storage.config import LogConfig
from epochlog.storage.deferred_deletes import DeferredDeletes
from epochlog.storage.log import Log
from epochlog.storage.log_dir_moves import (
    DELETE_SUFFIX,
    FUTURE_SUFFIX,
    RETIRED_SUFFIX,
    DirScan,
    adopt_epochs,
    carry_quarantine,
    moving_dir_name,
    repoint_quarantine,
    settle,
)
from epochlog.storage.quarantine import delete_keeping_quarantine
from epochlog.storage.roll_flusher import RollFlusher
from epochlog.storage.scrubber import Scrubber

logger = logging.getLogger("epochlog.storage")

_MAX_TICK_S = 1.0
_REPLACED_CHECK_INTERVAL_MS = 1000


@dataclass(frozen=True)
class LogManagerSettings:
    """Broker-level scheduling settings, Kafka names and defaults."""

    flush_scheduler_interval_ms: int = bound(BROKER, "log.flush.scheduler.interval.ms")
    retention_check_interval_ms: int = bound(BROKER, "log.retention.check.interval.ms")
    flush_offset_checkpoint_interval_ms: int = bound(
        BROKER, "log.flush.offset.checkpoint.interval.ms"
    )
    flush_start_offset_checkpoint_interval_ms: int = bound(
        BROKER, "log.flush.start.offset.checkpoint.interval.ms"
    )
    producer_id_expiration_ms: int = bound(BROKER, "producer.id.expiration.ms")
    producer_id_expiration_check_interval_ms: int = bound(
        BROKER, "producer.id.expiration.check.interval.ms"
    )
    cleaner_enable: bool = bound(BROKER, "log.cleaner.enable")
    cleaner_backoff_ms: int = bound(BROKER, "log.cleaner.backoff.ms")
    cleaner_dedupe_buffer_size: int = bound(BROKER, "log.cleaner.dedupe.buffer.size")
    file_delete_delay_ms: int = bound(BROKER, "file.delete.delay.ms")
    message_max_decompressed_bytes: int = bound(BROKER, "message.max.decompressed.bytes")
    scrub_interval_ms: int = bound(BROKER, "log.scrub.interval.ms")
    scrub_bytes_per_second: int = bound(BROKER, "log.scrub.bytes.per.second")

    @classmethod
    def from_settings(cls, settings: Settings) -> LogManagerSettings:
        return bind(cls, settings)


class LogManager:
    def __init__(
        self,
        disk: Disk,
        clock: Clock,
        log_dirs: list[str],
        default_config: LogConfig,
        settings: LogManagerSettings | None = None,
        high_watermark: Callable[[str, int], int | None] | None = None,
    ) -> None:
        if not log_dirs:
            raise ValueError("log.dirs must name at least one directory")
        self.disk = disk
        self.clock = clock
        self.log_dirs = list(log_dirs)
        self.default_config = default_config
        self.settings = s = settings or LogManagerSettings()
        self._logs: dict[TopicPartition, Log] = {}
        self._dir_of: dict[TopicPartition, str] = {}
        # Logs being copied to another dir by AlterReplicaLogDirs (``log_dir_moves``).
        self._futures: dict[TopicPartition, Log] = {}
        self._future_dir_of: dict[TopicPartition, str] = {}
        # Replaced logs: renamed to -delete, closed and removed at (due ms) so that a
        # read already handed their files finishes (Kafka's file.delete.delay.ms).
        self._replaced: list[tuple[int, Log, str]] = []
        self.offline_dirs: set[str] = set()
        # Told which partitions a log dir failing while running took offline.
        self.on_dir_failure: Callable[[str, list[TopicPartition]], None] | None = None
        # Where AlterReplicaLogDirs asked a partition not hosted yet to be created.
        self.preferred_dirs: dict[TopicPartition, str] = {}
        # Where each partition's high watermark comes from (bounds the cleaner).
        self.high_watermark = high_watermark
        self.cleaner = LogCleaner(disk, clock, s.cleaner_dedupe_buffer_size, s.file_delete_delay_ms)
        self._first_dirty: dict[TopicPartition, int] = {}
        self.checkpoints = DirCheckpoints(disk)
        self._warned_no_hw = False
        self.validator = RecordValidator(self.settings.message_max_decompressed_bytes)
        self.scrubber = Scrubber(
            clock, self.all_logs, s.scrub_interval_ms, s.scrub_bytes_per_second
        )
        self.deferred_deletes = DeferredDeletes(disk, clock)
        self.roll_flusher = RollFlusher(
            clock, lambda log, exc: self.fail_dir_of(log.topic, log.partition, exc)
        )

    def _open(self, path: str, topic: str, partition: int, config: LogConfig, **state: Any) -> Log:
        log = Log.open(
            self.disk, self.clock, path, topic, partition, config, validator=self.validator, **state
        )
        log.on_roll = self.roll_flusher.rolled
        log.delete_later = self.deferred_deletes.later
        return log

    # -- lifecycle ---------------------------------------------------------------------

    def start(self, topic_configs: Callable[[str], LogConfig] | None = None) -> None:
        """Load every partition in every log dir (future logs too, after settling any
        move a crash interrupted), then clear the clean-shutdown markers. A dir that
        cannot be read is offline, as in Kafka; the broker goes on with the others."""
        scan = DirScan()
        for log_dir in self.log_dirs:
            try:
                names = self._partition_dirs(log_dir)
            except OSError as exc:
                self._mark_offline(log_dir, exc)
                continue
            for name in names:
                scan.add(log_dir, name)
        if len(self.offline_dirs) == len(self.log_dirs):
            raise OSError(f"all log dirs ({', '.join(self.log_dirs)}) have failed")
        # A lone future log is promoted only when no dir is offline: its current log
        # may be in the offline one, and a partial copy must not stand in for it.
        settle(self.disk, scan, promote_lone_futures=not self.offline_dirs)
        for log_dir in self.log_dirs:
            if log_dir in self.offline_dirs:
                continue
            try:
                self._load_dir(log_dir, scan, topic_configs)
            except OSError as exc:
                self._mark_offline(log_dir, exc)
        for tp in [tp for tp in self._futures if tp not in self._logs]:
            logger.warning("%s-%d: a future log kept on disk, not loaded: no current log", *tp)
            self._future_dir_of.pop(tp)
            for segment in self._futures.pop(tp).segments:
                segment.close()

    def _partition_dirs(self, log_dir: str) -> list[str]:
        """The dirs of ``log_dir`` (after removing those left by interrupted deletes)."""
        self.disk.makedirs(log_dir)
        names = []
        for name in self.disk.listdir(log_dir):
            if name.endswith(DELETE_SUFFIX):
                logger.info("removing %s/%s left by an interrupted delete", log_dir, name)
                self.disk.rmtree(f"{log_dir}/{name}")
            elif self.disk.exists(f"{log_dir}/{name}/"):
                names.append(name)
        return names

    def _load_dir(
        self, log_dir: str, scan: DirScan, topic_configs: Callable[[str], LogConfig] | None
    ) -> None:
        clean = was_clean_shutdown(self.disk, log_dir)
        recovery = self.checkpoints.read(log_dir, RECOVERY_POINT_CHECKPOINT)
        starts = self.checkpoints.read(log_dir, LOG_START_OFFSET_CHECKPOINT)
        floors = self.checkpoints.read(log_dir, OFFSET_FLOOR_CHECKPOINT)
        self._first_dirty.update(self.checkpoints.read(log_dir, CLEANER_CHECKPOINT))
        prefix = log_dir + "/"
        for table, logs, dirs in (
            (scan.current, self._logs, self._dir_of),
            (scan.future, self._futures, self._future_dir_of),
        ):
            for tp, paths in sorted(table.items()):
                for path in (p for p in paths if p.startswith(prefix)):
                    if tp in logs:
                        raise ValueError(f"{tp[0]}-{tp[1]} found twice: {path}")
                    config = topic_configs(tp[0]) if topic_configs else self.default_config
                    logs[tp] = self._open(
                        path,
                        tp[0],
                        tp[1],
                        config,
                        recovery_point=recovery.get(tp, 0),
                        log_start_offset=starts.get(tp, 0),
                        clean_shutdown=clean,
                        offset_floor=floors.get(tp, 0),
                    )
                    dirs[tp] = log_dir
        clear_clean_shutdown(self.disk, log_dir)

    def _mark_offline(self, log_dir: str, exc: OSError) -> None:
        """Kafka's log dir failure: the dir's logs are no longer served."""
        logger.error("log dir %s is offline: %s", log_dir, exc)
        self.offline_dirs.add(log_dir)
        for logs, dirs in ((self._logs, self._dir_of), (self._futures, self._future_dir_of)):
            for tp in [tp for tp, d in dirs.items() if d == log_dir]:
                del dirs[tp]
                for segment in logs.pop(tp).segments:
                    with contextlib.suppress(OSError):
                        segment.close()

    def fail_dir(self, log_dir: str, exc: OSError) -> None:
        """An I/O error in ``log_dir`` while running: Kafka's log dir failure. Its logs
        are closed and no longer served; the owner of the partitions is told which."""
        if log_dir in self.offline_dirs:
            return
        failed = [tp for tp, d in self._dir_of.items() if d == log_dir]
        self._mark_offline(log_dir, exc)
        for tp in failed:  # a copy elsewhere stays on disk: it may be all that is left
            future = self._futures.pop(tp, None)
            if future is not None:
                self._future_dir_of.pop(tp)
                future.close()
        if not self.online_dirs:
            logger.critical("every log dir (%s) is offline", ", ".join(self.log_dirs))
        if self.on_dir_failure is not None:
            self.on_dir_failure(log_dir, failed)

    def fail_dir_of(self, topic: str, partition: int, exc: OSError) -> None:
        log_dir = self._dir_of.get((topic, partition))
        if log_dir is not None:
            self.fail_dir(log_dir, exc)

    @property
    def online_dirs(self) -> list[str]:
        return [d for d in self.log_dirs if d not in self.offline_dirs]

    def close(self) -> None:
        """Flush and close every log, write checkpoints, then mark a clean shutdown, but
        not in a log dir holding a hole: its log's recovery point stays below the hole,
        so the next start re-validates from there and finds the hole again."""
        for log in (*self._logs.values(), *self._futures.values()):
            log.close()
        self.delete_replaced_logs(self.clock.time_ms(), force=True)
        self.deferred_deletes.run_now()
        self.cleaner.close_retired(self.clock.time_ms(), force=True)
        self.checkpoint_cleaner_offsets()
        self.checkpoint_recovery_points()
        self.checkpoint_offset_floors()
        self.checkpoint_log_start_offsets()
        holed = [log.directory for log in self._logs.values() if log.holes]
        for log_dir in self.online_dirs:
            if any(directory.startswith(log_dir.rstrip("/") + "/") for directory in holed):
                logger.warning("%s: not marked shut down cleanly: a log has a hole", log_dir)
                continue
            mark_clean_shutdown(self.disk, log_dir)

    # -- logs --------------------------------------------------------------------------

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self._logs.get((topic, partition))

    def all_logs(self) -> list[Log]:
        return list(self._logs.values())

    def create_log(
        self,
        topic: str,
        partition: int,
        config: LogConfig | None = None,
        topic_id: str | None = None,
    ) -> Log:
        """The partition's log, created in the log dir holding the fewest partitions."""
        tp = (topic, partition)
        log = self._logs.get(tp)
        if log is None:
            online = self.online_dirs
            if not online:
                raise OSError(f"no log dir online for {topic}-{partition}")
            counts = {d: 0 for d in online}
            for d in self._dir_of.values():
                counts[d] = counts.get(d, 0) + 1
            log_dir = self.preferred_dirs.pop(tp, None)
            if log_dir not in online:
                log_dir = min(online, key=lambda d: counts[d])
            log = self._open(
                f"{log_dir}/{topic}-{partition}", topic, partition, config or self.default_config
            )
            self._logs[tp] = log
            self._dir_of[tp] = log_dir
        if topic_id is not None:
            log.set_topic_id(topic_id)
        return log

    def delete_log(self, topic: str, partition: int) -> bool:
        tp = (topic, partition)
        log = self._logs.pop(tp, None)
        if log is None:
            return False
        self._dir_of.pop(tp)
        self._first_dirty.pop(tp, None)
        self.delete_future_log(topic, partition)
        log.delete()
        return True

    def retire_log(self, topic: str, partition: int, keep_from: int, reason: str) -> None:
        """This broker left the replicas (a reassignment): from ``keep_from`` (its HW) on,
        what those left may lack goes to quarantine, which stays; the rest is deleted."""
        tp = (topic, partition)
        log = self._logs.pop(tp, None)
        if log is None:
            return
        self._dir_of.pop(tp)
        self._first_dirty.pop(tp, None)
        self.delete_future_log(topic, partition)
        if keep_from < log.log_end_offset:
            log.truncate_to(max(keep_from, log.log_start_offset), reason)
        first, last = log.log_start_offset, log.log_end_offset - 1
        logger.info("%s-%d: deleting %d..%d, held by every replica left in sync (%s)",
                    topic, partition, first, last, reason)  # fmt: skip
        if log.quarantine.list():
            delete_keeping_quarantine(self.disk, log.directory, log.delete)
            logger.info("%s-%d: its quarantine stays in %s", topic, partition, log.directory)
        else:
            log.delete()

    def log_dir_named(self, path: str) -> str | None:
        """The configured log dir ``path`` names (Kafka compares absolute paths)."""
        wanted = os.path.abspath(path)
        return next((d for d in self.log_dirs if os.path.abspath(d) == wanted), None)

    def dir_of(self, topic: str, partition: int) -> str | None:
        return self._dir_of.get((topic, partition))

    def logs_in(self, log_dir: str) -> list[tuple[Log, bool]]:
        """(log, is future) of every log in ``log_dir``."""
        return [(self._logs[tp], False) for tp, d in self._dir_of.items() if d == log_dir] + [
            (self._futures[tp], True) for tp, d in self._future_dir_of.items() if d == log_dir
        ]

    # -- moves between log dirs (``storage/log_dir_moves.py``) -------------------------

    def future_log(self, topic: str, partition: int) -> tuple[Log, str] | None:
        """The partition's future log and its dir, while a move is under way."""
        tp = (topic, partition)
        future = self._futures.get(tp)
        return None if future is None else (future, self._future_dir_of[tp])

    def create_future_log(self, topic: str, partition: int, log_dir: str) -> Log:
        """An empty future log of a hosted partition in another online log dir."""
        tp = (topic, partition)
        current = self._logs[tp]
        if log_dir in self.offline_dirs or self._dir_of[tp] == log_dir:
            raise ValueError(f"{log_dir} cannot receive {topic}-{partition}")
        token = str(self.clock.time_ms())
        name = moving_dir_name(topic, partition, token, FUTURE_SUFFIX)
        # Its log start follows the current log's at the first copy step.
        future = self._open(f"{log_dir}/{name}", topic, partition, current.config)
        if current.topic_id is not None:
            future.set_topic_id(current.topic_id)
        self._futures[tp] = future
        self._future_dir_of[tp] = log_dir
        return future

    def delete_future_log(self, topic: str, partition: int) -> None:
        """Give a move up: the future log is a copy, the current one holds everything."""
        tp = (topic, partition)
        future = self._futures.pop(tp, None)
        if future is not None:
            self._future_dir_of.pop(tp)
            future.delete()

    def replace_current_with_future(self, topic: str, partition: int) -> Log:
        """The swap, once the future log ends where the current one does: returns the
        partition's new current log, opened from its new place. The old one is kept
        open, renamed -delete, until ``file.delete.delay.ms`` has passed."""
        tp = (topic, partition)
        current, future = self._logs[tp], self._futures[tp]
        if current.log_end_offset != future.log_end_offset:
            raise ValueError(f"{topic}-{partition}: the future log is not caught up")
        current.flush()
        carry_quarantine(self.disk, current, future)
        future.close()
        source_dir, target_dir = self._dir_of[tp], self._future_dir_of[tp]
        token = str(self.clock.time_ms())
        retired = f"{source_dir}/{moving_dir_name(topic, partition, token, RETIRED_SUFFIX)}"
        self.disk.rename(current.directory, retired)
        target = f"{target_dir}/{topic}-{partition}"
        repoint_quarantine(self.disk, future.directory, target)
        self.disk.rename(future.directory, target)
        doomed = retired.removesuffix(RETIRED_SUFFIX) + DELETE_SUFFIX
        self.disk.rename(retired, doomed)
        moved = self._open(
            target,
            topic,
            partition,
            current.config,
            recovery_point=future.log_end_offset,
            log_start_offset=future.log_start_offset,
            clean_shutdown=True,
        )
        adopt_epochs(current, moved)  # after the load, which drops an epoch without a batch
        del self._futures[tp], self._future_dir_of[tp]
        self._logs[tp], self._dir_of[tp] = moved, target_dir
        self._first_dirty.pop(tp, None)
        self._replaced.append(
            (self.clock.time_ms() + self.settings.file_delete_delay_ms, current, doomed)
        )
        self.checkpoint_recovery_points()
        self.checkpoint_offset_floors()
        self.checkpoint_log_start_offsets()
        logger.info("%s-%d moved from %s to %s", topic, partition, source_dir, target_dir)
        return moved

    def delete_replaced_logs(self, now_ms: int, force: bool = False) -> None:
        """Close and remove the replaced logs whose delay has passed."""
        keep = []
        for due, log, path in self._replaced:
            if force or now_ms >= due:
                for segment in log.segments:
                    segment.close()
                self.deferred_deletes.later(lambda path=path: self.disk.rmtree(path))
            else:
                keep.append((due, log, path))
        self._replaced = keep

    # -- periodic work -----------------------------------------------------------------

    def flush_due_logs(self, now_ms: int) -> None:
        for log in self.all_logs():
            try:
                log.maybe_flush(now_ms)
            except OSError as exc:
                self.fail_dir_of(log.topic, log.partition, exc)

    def enforce_retention(self, now_ms: int) -> int:
        deleted = 0
        for log in self.all_logs():
            log.maybe_roll(now_ms)
            deleted += log.delete_segments_for_retention(now_ms)
        return deleted

    def expire_producers(self, now_ms: int) -> None:
        for log in self.all_logs():
            log.producer_state.remove_expired(now_ms, self.settings.producer_id_expiration_ms)

    def first_dirty_offset(self, log: Log) -> int:
        return first_dirty_offset(self._first_dirty, log)

    def clean_logs(self, now_ms: int) -> int:
        """``_cleaning_pass`` at once."""
        return drain(self._cleaning_pass(now_ms))

    def _cleaning_pass(self, now_ms: int) -> Generator[Step, None, int]:
        """Bounded by each partition's high watermark (``storage/cleaning_pass.py``)."""
        self.cleaner.close_retired(now_ms)
        if self.high_watermark is None:
            if not self._warned_no_hw:
                logger.info("log cleaner idle: no high-watermark source to bound it")
                self._warned_no_hw = True
            return 0
        cleaned = yield from cleaning_pass(
            self.cleaner,
            self.all_logs(),
            self._first_dirty,
            self.high_watermark,
            self._serves_unmoved,
            now_ms,
        )
        if cleaned:
            self.checkpoint_cleaner_offsets()
        return cleaned

    def _serves_unmoved(self, log: Log) -> bool:
        """Kafka pauses cleaning a partition while it moves between log dirs."""
        tp = (log.topic, log.partition)
        return self._logs.get(tp) is log and tp not in self._futures

    def checkpoint_cleaner_offsets(self) -> None:
        self._write_checkpoints(CLEANER_CHECKPOINT, self.first_dirty_offset)

    def checkpoint_recovery_points(self) -> None:
        self._write_checkpoints(RECOVERY_POINT_CHECKPOINT, lambda log: log.recovery_point)

    def checkpoint_offset_floors(self) -> None:
        """Each log's offset floor (``Log.offset_floor``), in the dirs where one moved."""
        self._write_checkpoints(OFFSET_FLOOR_CHECKPOINT, lambda log: log.offset_floor, True)

    def checkpoint_log_start_offsets(self) -> None:
        self._write_checkpoints(LOG_START_OFFSET_CHECKPOINT, lambda log: log.log_start_offset)

    def _write_checkpoints(
        self, name: str, value: Callable[[Log], int], only_changed: bool = False
    ) -> None:
        for log_dir in self.online_dirs:
            offsets = {(log.topic, log.partition): value(log) for log, _ in self.logs_in(log_dir)}
            try:
                self.checkpoints.write(log_dir, name, offsets, only_changed)
            except OSError as exc:
                self.fail_dir(log_dir, exc)

    def reconfigure(
        self,
        default_config: LogConfig,
        settings: LogManagerSettings,
        topic_config: Callable[[str], LogConfig],
    ) -> None:
        """Dynamic broker settings changed: every log takes its topic's settings over
        the new defaults, and the cleaner and producer expiry their new settings from
        their next run on."""
        self.default_config = default_config
        self.settings = settings
        self.cleaner.resize(settings.cleaner_dedupe_buffer_size)
        for (topic, _), log in self._logs.items():
            log.config = topic_config(topic)

    async def run_background(self, stop_event: asyncio.Event) -> None:
        """Run the periodic tasks until ``stop_event`` is set, sleeping on the Clock."""
        s = self.settings
        tasks: list[tuple[Callable[[], int], Callable[[int], object]]] = [
            (lambda: s.flush_scheduler_interval_ms, self.flush_due_logs),
            (lambda: s.retention_check_interval_ms, self.enforce_retention),
            (
                lambda: s.flush_offset_checkpoint_interval_ms,
                lambda _: self.checkpoint_recovery_points(),
            ),
            (
                lambda: s.flush_start_offset_checkpoint_interval_ms,
                lambda _: self.checkpoint_log_start_offsets(),
            ),
            (lambda: s.producer_id_expiration_check_interval_ms, self.expire_producers),
            (lambda: _REPLACED_CHECK_INTERVAL_MS, self.delete_replaced_logs),
            (lambda: OFFSET_FLOOR_INTERVAL_MS, lambda _: self.checkpoint_offset_floors()),
        ]
        loop = asyncio.get_running_loop()
        background = (self.roll_flusher, self.deferred_deletes)
        helpers = [loop.create_task(helper.run(stop_event)) for helper in background]
        if s.cleaner_enable:
            helpers.append(loop.create_task(self._run_cleaner(stop_event)))
        if s.scrub_interval_ms > 0:
            helpers.append(loop.create_task(self.scrubber.run(stop_event)))
        try:
            await self._run_tasks(tasks, stop_event)
        finally:
            for helper in helpers:
                helper.cancel()

    async def _run_cleaner(self, stop_event: asyncio.Event) -> None:
        """A cleaning pass every ``log.cleaner.backoff.ms`` (dynamic: read at each
        run), in steps that leave the loop to requests (seams/tasks.py)."""
        while not stop_event.is_set():
            await self.clock.sleep(self.settings.cleaner_backoff_ms / 1000)
            try:
                pass_ = self._cleaning_pass(self.clock.time_ms())
                await in_steps(self.clock, pass_, self.disk.off_loop)
            except Exception:
                logger.exception("log cleaner pass failed")

    async def _run_tasks(
        self,
        tasks: list[tuple[Callable[[], int], Callable[[int], object]]],
        stop_event: asyncio.Event,
    ) -> None:
        start = self.clock.time_ms()
        due = [start + interval() for interval, _ in tasks]
        while not stop_event.is_set():
            now = self.clock.time_ms()
            for i, (interval, task) in enumerate(tasks):
                if now >= due[i]:
                    try:
                        task(now)
                    except Exception:
                        logger.exception("log manager background task failed")
                    due[i] = now + interval()
            wait_ms = max(min(due) - self.clock.time_ms(), 1)
            await self.clock.sleep(min(wait_ms / 1000, _MAX_TICK_S))
