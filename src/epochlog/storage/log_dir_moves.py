"""Moving a replica between the log dirs of one broker (AlterReplicaLogDirs), as Kafka
does: a *future* log ``<topic>-<partition>.<token>-future`` in the target dir copies the
current log batch by batch, appended as a follower appends (so epochs, producer state and
transaction indexes are rebuilt from the batches), while the current log goes on serving.
Once both ends meet, the swap (``LogManager.replace_current_with_future``).

What the current log's truncations kept aside goes along: at the swap each quarantine
entry is copied into the new dir (a crash in the middle copies it again at the next swap:
a duplicate, never a loss). The swap leaves no state that loses data at a crash: both
logs are flushed, the current dir is renamed ``.<token>-retired`` (a name never deleted
at start), the future dir takes the partition's name, and only then does the retired
copy become ``-delete``. At start, ``settle`` finishes or undoes what a crash
interrupted: a retired copy beside a current log is deleted (the current one holds
everything); beside only a future log, the future log was complete, so it is promoted;
alone, it is put back. A future log with a current one is loaded as a future log and the
move resumes; alone, it is kept as the current log, unless a log dir is offline (the
current log may be there: the copy waits on disk, not loaded).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field

from epochlog.protocol.batch import read_header
from epochlog.protocol.divergence import follower_truncation_offset
from epochlog.seams import Disk
from epochlog.storage.checkpoints import TopicPartition
from epochlog.storage.log import Log
from epochlog.storage.quarantine import QUARANTINE_DIR

logger = logging.getLogger("epochlog.storage")

FUTURE_SUFFIX = "-future"
RETIRED_SUFFIX = "-retired"
DELETE_SUFFIX = "-delete"


def parse_partition_dir(name: str) -> TopicPartition | None:
    """``<topic>-<partition>`` -> (topic, partition), or None for anything else."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        return None
    return topic, int(partition)


def moving_dir_name(topic: str, partition: int, token: str, suffix: str) -> str:
    return f"{topic}-{partition}.{token}{suffix}"


def parse_moving_dir(name: str, suffix: str) -> TopicPartition | None:
    """The partition of a ``<topic>-<partition>.<token><suffix>`` dir, else None."""
    if not name.endswith(suffix):
        return None
    base, dot, token = name.removesuffix(suffix).rpartition(".")
    return parse_partition_dir(base) if dot and token else None


@dataclass
class DirScan:
    """What the log dirs hold, by partition: current, future and retired dirs (paths)."""

    current: dict[TopicPartition, list[str]] = field(default_factory=dict)
    future: dict[TopicPartition, list[str]] = field(default_factory=dict)
    retired: dict[TopicPartition, list[str]] = field(default_factory=dict)

    def add(self, log_dir: str, name: str) -> None:
        path = f"{log_dir}/{name}"
        for suffix, table in ((FUTURE_SUFFIX, self.future), (RETIRED_SUFFIX, self.retired)):
            tp = parse_moving_dir(name, suffix)
            if tp is not None:
                table.setdefault(tp, []).append(path)
                return
        tp = parse_partition_dir(name)
        if tp is not None:
            self.current.setdefault(tp, []).append(path)


def _partition_path(moving_path: str, tp: TopicPartition) -> str:
    return f"{moving_path.rpartition('/')[0]}/{tp[0]}-{tp[1]}"


def settle(disk: Disk, scan: DirScan, promote_lone_futures: bool = True) -> None:
    """Finish or undo the swaps a crash interrupted (see the module's docstring)."""
    for tp, retired in sorted(scan.retired.items()):
        for path in retired:
            if tp in scan.current:
                logger.info("%s: removing %s, replaced by %s", tp, path, scan.current[tp][0])
                disk.rename(path, path.removesuffix(RETIRED_SUFFIX) + DELETE_SUFFIX)
                disk.rmtree(path.removesuffix(RETIRED_SUFFIX) + DELETE_SUFFIX)
                continue
            futures = scan.future.pop(tp, [])
            source = futures[0] if futures else path
            target = _partition_path(source, tp)
            logger.warning("%s: finishing an interrupted move: %s -> %s", tp, source, target)
            repoint_quarantine(disk, source, target)
            disk.rename(source, target)
            scan.current[tp] = [target]
            scan.future.pop(tp, None)
            if futures:
                disk.rename(path, path.removesuffix(RETIRED_SUFFIX) + DELETE_SUFFIX)
                disk.rmtree(path.removesuffix(RETIRED_SUFFIX) + DELETE_SUFFIX)
    for tp, futures in sorted(scan.future.items()):
        if tp not in scan.current and promote_lone_futures:
            target = _partition_path(futures[0], tp)
            logger.warning("%s: a future log without its current log: kept as %s", tp, target)
            repoint_quarantine(disk, futures[0], target)
            disk.rename(futures[0], target)
            scan.current[tp] = [target]
            scan.future[tp] = futures[1:]


def copy_step(current: Log, future: Log, max_bytes: int) -> bool:
    """Bring ``future`` closer to ``current``: follow a truncation or a new log start of
    the current log, then append up to ``max_bytes`` of what it lacks. True once both
    logs end at the same offset with the same history (the swap may happen now)."""
    if current.log_start_offset > future.log_end_offset:
        future.truncate_fully_and_start_at(current.log_start_offset, "future log restarted")
    elif future.log_end_offset > future.log_start_offset:
        epoch, end = current.end_offset_for_epoch(future.epoch_cache.latest_epoch)
        own_epoch, own_end = future.end_offset_for_epoch(epoch)
        target = follower_truncation_offset(
            epoch, end, own_epoch, own_end, future.log_start_offset, future.log_end_offset
        )
        if target < future.log_end_offset:
            future.truncate_to(target, "the current log was truncated during a move")
            return False
    if current.log_start_offset > future.log_start_offset:
        future.maybe_increment_log_start_offset(current.log_start_offset)
    if future.log_end_offset < current.log_end_offset:
        read = current.read(future.log_end_offset, max_bytes)
        for piece in read.slices:
            data = bytearray(piece.file.pread(piece.size, piece.position))
            first = read_header(data, 0).base_offset
            if first < future.log_end_offset == future.log_start_offset:
                # A log start inside a batch (DeleteRecords): the copy starts at its base.
                future.truncate_fully_and_start_at(first, "future log aligned to a batch")
            future.append_as_follower(data)
        if current.log_start_offset > future.log_start_offset:
            future.maybe_increment_log_start_offset(current.log_start_offset)
    return future.log_end_offset == current.log_end_offset


def adopt_epochs(current: Log, future: Log) -> None:
    """Epochs the current log started without a batch (a new leader's) are the future
    log's too: at the swap both hold the same batches."""
    for epoch, start in current.epoch_cache.entries():
        if epoch > future.epoch_cache.latest_epoch:
            future.maybe_assign_epoch_start_offset(epoch, start)


def carry_quarantine(disk: Disk, current: Log, future: Log) -> int:
    """Copy every quarantine entry of ``current`` into ``future``'s quarantine (its
    description naming where it came from); returns how many."""
    source = current.quarantine.directory
    if not disk.exists(source):
        return 0
    carried = 0
    for name in disk.listdir(source):
        if not name.endswith(".json"):
            continue
        description = json.loads(disk.read_file(f"{source}/{name}"))
        stem = name.removesuffix(".json")
        data = disk.open(f"{source}/{stem}.log")
        try:
            kept = {k: v for k, v in description.items() if k not in ("size", "file")}
            kept["moved_from"] = description.get("file")
            kept["first_kept_ms"] = description.get("first_kept_ms", description.get("time_ms"))
            future.quarantine.keep(stem, [(data, 0, data.size())], kept)
        finally:
            data.close()
        carried += 1
    return carried


def repoint_quarantine(disk: Disk, partition_dir: str, new_dir: str) -> None:
    """Before ``partition_dir`` is renamed ``new_dir``: descriptions of its quarantine
    name their files under ``new_dir`` (done first, a crash leaves them right)."""
    folder = f"{partition_dir}/{QUARANTINE_DIR}"
    if not disk.exists(folder):
        return
    for name in disk.listdir(folder):
        if not name.endswith(".json"):
            continue
        description = json.loads(disk.read_file(f"{folder}/{name}"))
        where = str(description.get("file", ""))
        if where.startswith(partition_dir + "/"):
            description["file"] = new_dir + where[len(partition_dir) :]
            disk.write_atomic(f"{folder}/{name}", json.dumps(description, indent=2).encode())
