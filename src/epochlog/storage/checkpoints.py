"""Kafka's per-log-dir checkpoint files and the clean-shutdown marker.

``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint`` and epochlog's
``next-offset-floor-checkpoint`` (each log's offset floor: the highest log end it reached,
so that no offset is given out twice after its data is lost) share one format:
``0`` (version), the entry count, then ``<topic> <partition> <offset>`` lines. Both are
replaced atomically so a crash leaves either the old or the new file.
"""

from __future__ import annotations

import logging

from epochlog.seams import Disk

logger = logging.getLogger("epochlog.storage")

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
OFFSET_FLOOR_CHECKPOINT = "next-offset-floor-checkpoint"
# How often the offset floors are written when they moved: a crash then loses at most
# this long of them, and only records acknowledged within it can be given out again
# if damage takes them (a torn write, as Kafka takes it).
OFFSET_FLOOR_INTERVAL_MS = 1000
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"

TopicPartition = tuple[str, int]


class OffsetCheckpointFile:
    """One checkpoint file: read it whole, write it whole."""

    def __init__(self, disk: Disk, path: str) -> None:
        self.disk = disk
        self.path = path

    def read(self) -> dict[TopicPartition, int]:
        """The stored offsets; an absent file is empty, a malformed one raises ValueError."""
        if not self.disk.exists(self.path):
            return {}
        lines = [ln for ln in self.disk.read_file(self.path).decode().splitlines() if ln.strip()]
        if len(lines) < 2 or lines[0].strip() != "0":
            raise ValueError(f"{self.path}: unknown checkpoint version or truncated file")
        count = int(lines[1])
        if count != len(lines) - 2:
            raise ValueError(f"{self.path}: expected {count} entries, found {len(lines) - 2}")
        out = {}
        for line in lines[2:]:
            # Topic names cannot contain spaces, so split from the right.
            topic, partition, offset = line.rsplit(" ", 2)
            out[(topic, int(partition))] = int(offset)
        return out

    def write(self, offsets: dict[TopicPartition, int]) -> None:
        lines = ["0", str(len(offsets))]
        lines += [f"{t} {p} {o}" for (t, p), o in sorted(offsets.items())]
        self.disk.write_atomic(self.path, ("\n".join(lines) + "\n").encode())


class DirCheckpoints:
    """A broker's checkpoint files, by log dir and name. A malformed one reads as empty
    (recovery then starts from scratch); one written often may be written only when it
    changed."""

    def __init__(self, disk: Disk) -> None:
        self.disk = disk
        self._written: dict[tuple[str, str], dict[TopicPartition, int]] = {}

    def read(self, log_dir: str, name: str) -> dict[TopicPartition, int]:
        try:
            return OffsetCheckpointFile(self.disk, f"{log_dir}/{name}").read()
        except (ValueError, UnicodeDecodeError) as exc:
            logger.warning("ignoring %s/%s (recovering from scratch): %s", log_dir, name, exc)
            return {}

    def write(
        self, log_dir: str, name: str, offsets: dict[TopicPartition, int], only_changed: bool
    ) -> None:
        """Raises OSError (the log dir failed)."""
        if only_changed and self._written.get((log_dir, name)) == offsets:
            return
        OffsetCheckpointFile(self.disk, f"{log_dir}/{name}").write(offsets)
        self._written[(log_dir, name)] = offsets


def clean_shutdown_path(log_dir: str) -> str:
    return f"{log_dir}/{CLEAN_SHUTDOWN_FILE}"


def was_clean_shutdown(disk: Disk, log_dir: str) -> bool:
    return disk.exists(clean_shutdown_path(log_dir))


def mark_clean_shutdown(disk: Disk, log_dir: str) -> None:
    disk.write_atomic(clean_shutdown_path(log_dir), b"")


def clear_clean_shutdown(disk: Disk, log_dir: str) -> None:
    """Removed at start: from now on a crash must trigger recovery."""
    if disk.exists(clean_shutdown_path(log_dir)):
        disk.remove(clean_shutdown_path(log_dir))
