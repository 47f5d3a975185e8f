"""AlterReplicaLogDirs on this broker: Kafka's ReplicaAlterLogDirsManager. A partition
being moved has a future log in the target dir; one task per such partition copies the
current log into it (``storage/log_dir_moves.copy_step``), chunk by chunk, while the
partition goes on serving from the current log, and swaps the two in the same step that
finds them equal, so no append can fall between the check and the swap."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from epochlog.protocol.errors import ErrorCode, KafkaError
from epochlog.seams.tasks import BackgroundTasks
from epochlog.seams.waiting import Signal
from epochlog.storage.log_dir_moves import copy_step

if TYPE_CHECKING:
    from epochlog.replication.partition import Partition
    from epochlog.seams import Clock
    from epochlog.storage.log import Log
    from epochlog.storage.log_manager import LogManager

log = logging.getLogger("epochlog.replication")

# With nothing left to copy, a move waits for the next append this long at most.
_IDLE_WAIT_S = 0.5


class LogDirMover:
    def __init__(
        self,
        log_manager: LogManager,
        clock: Clock,
        changed: Signal,
        hosted: Callable[[str, int], Partition | None],
        swapped: Callable[[Partition, Log], None],
        chunk_bytes: int,
        backoff_s: float,
    ) -> None:
        self._logs = log_manager
        self._clock = clock
        self._changed = changed
        self._hosted = hosted
        self._swapped = swapped
        self._chunk_bytes = chunk_bytes
        self._backoff_s = backoff_s
        self._tasks = BackgroundTasks(log, "moving a replica between log dirs")
        self._moving: set[tuple[str, int]] = set()

    def alter(self, partition: Partition, log_dir: str) -> None:
        """Move ``partition``'s replica to ``log_dir`` (Kafka's rules: to where it is,
        nothing, or the move under way is given up; to another dir, a move there
        replaces any move under way)."""
        topic, index = partition.topic, partition.index
        future = self._logs.future_log(topic, index)
        if future is not None and future[1] == log_dir:
            return
        self._logs.delete_future_log(topic, index)
        if self._logs.dir_of(topic, index) == log_dir:
            return
        if log_dir in self._logs.offline_dirs:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"log dir {log_dir} is offline")
        self._logs.create_future_log(topic, index, log_dir)
        self.resume(partition)

    def resume(self, partition: Partition) -> None:
        """Copy into the partition's future log, if it has one and no task copies yet."""
        key = (partition.topic, partition.index)
        if key in self._moving or self._logs.future_log(*key) is None:
            return
        self._moving.add(key)
        self._tasks.spawn(self._move(partition))

    async def _move(self, partition: Partition) -> None:
        key = (partition.topic, partition.index)
        try:
            while self._hosted(*key) is partition:
                found = self._logs.future_log(*key)
                if found is None:
                    return
                future = found[0]
                try:
                    if copy_step(partition.log, future, self._chunk_bytes):
                        moved = self._logs.replace_current_with_future(*key)
                        self._swapped(partition, moved)
                        return
                except Exception:
                    log.exception("%s: copying to its future log failed; retrying", partition)
                    await self._clock.sleep(self._backoff_s)
                    continue
                if future.log_end_offset >= partition.log.log_end_offset:
                    await self._changed.wait(self._clock, _IDLE_WAIT_S)
                else:
                    await self._clock.sleep(0)  # let requests in between chunks
        finally:
            self._moving.discard(key)

    async def stop(self) -> None:
        await self._tasks.cancel_and_wait()
