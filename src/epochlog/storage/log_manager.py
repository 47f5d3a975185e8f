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
import logging
from collections.abc import Callable
from dataclasses import dataclass

from epochlog.protocol.record_validation import RecordValidator
from epochlog.seams import Clock, Disk
from epochlog.settings.broker import BROKER
from epochlog.settings.registry import Settings, bind, bound
from epochlog.storage.checkpoints import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    OffsetCheckpointFile,
    TopicPartition,
    clear_clean_shutdown,
    mark_clean_shutdown,
    was_clean_shutdown,
)
from epochlog.storage.cleaner import CLEANER_CHECKPOINT, LogCleaner, dirty_ratio
from epochlog.storage.compaction_lag import cleanable_up_to, compaction_overdue
from epochlog.storage.config import LogConfig
from epochlog.storage.log import Log
from epochlog.storage.quarantine import QUARANTINE_DIR
from epochlog.storage.scrubber import Scrubber

logger = logging.getLogger("epochlog.storage")

_MAX_TICK_S = 1.0


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


def parse_partition_dir(name: str) -> TopicPartition | None:
    """``<topic>-<partition>`` -> (topic, partition), or None for anything else."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        return None
    return topic, int(partition)


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
        self.settings = settings or LogManagerSettings()
        self._logs: dict[TopicPartition, Log] = {}
        self._dir_of: dict[TopicPartition, str] = {}
        # Where each partition's high watermark comes from (bounds the cleaner).
        self.high_watermark = high_watermark
        self.cleaner = LogCleaner(
            disk,
            clock,
            self.settings.cleaner_dedupe_buffer_size,
            self.settings.file_delete_delay_ms,
        )
        self._first_dirty: dict[TopicPartition, int] = {}
        self._warned_no_hw = False
        self.validator = RecordValidator(self.settings.message_max_decompressed_bytes)
        self.scrubber = Scrubber(
            clock,
            self.all_logs,
            self.settings.scrub_interval_ms,
            self.settings.scrub_bytes_per_second,
        )

    # -- lifecycle ---------------------------------------------------------------------

    def start(self, topic_configs: Callable[[str], LogConfig] | None = None) -> None:
        """Load every partition in every log dir, then clear the clean-shutdown markers."""
        for log_dir in self.log_dirs:
            self.disk.makedirs(log_dir)
            clean = was_clean_shutdown(self.disk, log_dir)
            recovery = self._read_checkpoint(log_dir, RECOVERY_POINT_CHECKPOINT)
            starts = self._read_checkpoint(log_dir, LOG_START_OFFSET_CHECKPOINT)
            self._first_dirty.update(self._read_checkpoint(log_dir, CLEANER_CHECKPOINT))
            for name in self.disk.listdir(log_dir):
                path = f"{log_dir}/{name}"
                if name.endswith("-delete"):
                    logger.info("removing %s left by an interrupted delete", path)
                    self.disk.rmtree(path)
                    continue
                tp = parse_partition_dir(name)
                if tp is None or self.disk.exists(path + "/") is False:
                    continue
                if tp in self._logs:
                    raise ValueError(f"{tp[0]}-{tp[1]} found in two log dirs")
                config = topic_configs(tp[0]) if topic_configs else self.default_config
                self._logs[tp] = Log.open(
                    self.disk,
                    self.clock,
                    path,
                    tp[0],
                    tp[1],
                    config,
                    recovery_point=recovery.get(tp, 0),
                    log_start_offset=starts.get(tp, 0),
                    clean_shutdown=clean,
                    validator=self.validator,
                )
                self._dir_of[tp] = log_dir
            clear_clean_shutdown(self.disk, log_dir)

    def _read_checkpoint(self, log_dir: str, name: str) -> dict[TopicPartition, int]:
        try:
            return OffsetCheckpointFile(self.disk, f"{log_dir}/{name}").read()
        except (ValueError, UnicodeDecodeError) as exc:
            logger.warning("ignoring %s/%s (recovering from scratch): %s", log_dir, name, exc)
            return {}

    def close(self) -> None:
        """Flush and close every log, write checkpoints, then mark a clean shutdown, but
        not in a log dir holding a hole: its log's recovery point stays below the hole,
        so the next start re-validates from there and finds the hole again."""
        for log in self._logs.values():
            log.close()
        self.cleaner.close_retired(self.clock.time_ms(), force=True)
        self.checkpoint_cleaner_offsets()
        self.checkpoint_recovery_points()
        self.checkpoint_log_start_offsets()
        holed = [log.directory for log in self._logs.values() if log.holes]
        for log_dir in self.log_dirs:
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
            counts = {d: 0 for d in self.log_dirs}
            for d in self._dir_of.values():
                counts[d] += 1
            log_dir = min(self.log_dirs, key=lambda d: counts[d])
            log = Log.open(
                self.disk,
                self.clock,
                f"{log_dir}/{topic}-{partition}",
                topic,
                partition,
                config or self.default_config,
                validator=self.validator,
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
        log.delete()
        return True

    def retire_log(self, topic: str, partition: int, keep_from: int, reason: str) -> None:
        """This broker left the partition's replicas (a reassignment moved it away):
        what the log holds from ``keep_from`` (its high watermark) on, which the replicas
        left in sync may lack, goes to quarantine; the rest, which every one of them
        holds, is deleted. The quarantine stays in the partition's folder, never
        deleted with it (a folder left with only that loads as an empty log; one
        named ``.retiring``, left by a crash midway, is listed by the quarantine tools
        and never loaded)."""
        tp = (topic, partition)
        log = self._logs.pop(tp, None)
        if log is None:
            return
        self._dir_of.pop(tp)
        self._first_dirty.pop(tp, None)
        if keep_from < log.log_end_offset:
            log.truncate_to(max(keep_from, log.log_start_offset), reason)
        logger.info(
            "%s-%d: deleting offsets %d..%d, held by every replica left in sync (%s)",
            topic,
            partition,
            log.log_start_offset,
            log.log_end_offset - 1,
            reason,
        )
        if not log.quarantine.list():
            log.delete()
            return
        # The quarantine steps aside while the folder goes as a deleted topic's does,
        # then comes back to where its descriptions say its files are.
        aside = f"{log.directory}.retiring"
        self.disk.makedirs(aside)
        self.disk.rename(f"{log.directory}/{QUARANTINE_DIR}", f"{aside}/{QUARANTINE_DIR}")
        log.delete()
        self.disk.rename(aside, log.directory)
        logger.info("%s-%d: its quarantine stays in %s", topic, partition, log.directory)

    # -- periodic work -----------------------------------------------------------------

    def flush_due_logs(self, now_ms: int) -> None:
        for log in self.all_logs():
            log.maybe_flush(now_ms)

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
        """Where the uncleaned part of ``log`` starts (its log start if unknown, or if a
        truncation left the checkpointed offset past the log end)."""
        offset = self._first_dirty.get((log.topic, log.partition), log.log_start_offset)
        if offset > log.log_end_offset:
            offset = log.log_start_offset
        return max(offset, log.log_start_offset)

    def clean_logs(self, now_ms: int) -> int:
        """One cleaning pass over every compacted log dirty enough; returns how many
        were cleaned. Bounded by each partition's high watermark."""
        self.cleaner.close_retired(now_ms)
        if self.high_watermark is None:
            if not self._warned_no_hw:
                logger.info("log cleaner idle: no high-watermark source to bound it")
                self._warned_no_hw = True
            return 0
        cleaned = 0
        for log in self.all_logs():
            if not log.config.compact:
                continue
            bound = self.high_watermark(log.topic, log.partition)
            if bound is None:
                continue
            hole = log.holes.first()
            if hole is not None:  # nothing from a hole's segment on until it is filled
                bound = min(bound, hole.first_offset)
            bound = cleanable_up_to(log, bound, now_ms)
            first_dirty = self.first_dirty_offset(log)
            ratio = dirty_ratio(log, first_dirty, bound)
            if ratio < log.config.min_cleanable_dirty_ratio and not compaction_overdue(
                log, first_dirty, bound, now_ms
            ):
                continue
            result = self.cleaner.clean(log, first_dirty, bound, now_ms)
            if result is not None:
                self._first_dirty[(log.topic, log.partition)] = result[1]
                cleaned += 1
        if cleaned:
            self.checkpoint_cleaner_offsets()
        return cleaned

    def checkpoint_cleaner_offsets(self) -> None:
        self._write_checkpoints(CLEANER_CHECKPOINT, self.first_dirty_offset)

    def checkpoint_recovery_points(self) -> None:
        self._write_checkpoints(RECOVERY_POINT_CHECKPOINT, lambda log: log.recovery_point)

    def checkpoint_log_start_offsets(self) -> None:
        self._write_checkpoints(LOG_START_OFFSET_CHECKPOINT, lambda log: log.log_start_offset)

    def _write_checkpoints(self, name: str, value: Callable[[Log], int]) -> None:
        for log_dir in self.log_dirs:
            offsets = {tp: value(self._logs[tp]) for tp, d in self._dir_of.items() if d == log_dir}
            OffsetCheckpointFile(self.disk, f"{log_dir}/{name}").write(offsets)

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
        ]
        if s.cleaner_enable:
            # log.cleaner.backoff.ms is dynamic: read at each run.
            tasks.append((lambda: self.settings.cleaner_backoff_ms, self.clean_logs))
        scrubbing = None
        if s.scrub_interval_ms > 0:
            scrubbing = asyncio.get_running_loop().create_task(self.scrubber.run(stop_event))
        try:
            await self._run_tasks(tasks, stop_event)
        finally:
            if scrubbing is not None:
                scrubbing.cancel()

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
