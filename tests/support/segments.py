"""Read the on-disk layout the broker shares with Kafka, to damage it on purpose.

Only the framing is read (baseOffset, batchLength): the tests need to know where a
batch starts and ends in a segment file, nothing about what it holds.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

_FRAMING = struct.Struct(">qi")
LOG_OVERHEAD = 12


@dataclass(frozen=True, slots=True)
class BatchSpan:
    """Where one record batch sits in a segment file."""

    path: Path
    position: int
    base_offset: int
    size: int


def partition_dir(log_dir: Path, topic: str, partition: int = 0) -> Path:
    """Kafka's layout: <log.dirs>/<topic>-<partition>/ (searched below log_dir)."""
    name = f"{topic}-{partition}"
    found = [p for p in log_dir.rglob(name) if p.is_dir()]
    assert len(found) == 1, f"expected one partition dir {name} under {log_dir}, found {found}"
    return found[0]


def segment_files(log_dir: Path, topic: str, partition: int = 0) -> list[Path]:
    """Segment data files (<baseOffset>.log), oldest first."""
    files = sorted(partition_dir(log_dir, topic, partition).glob("*.log"))
    assert files, f"no segment files for {topic}-{partition} under {log_dir}"
    return files


def batch_spans(path: Path) -> list[BatchSpan]:
    """Every whole batch in one segment, by its framing only."""
    data = path.read_bytes()
    spans = []
    pos = 0
    while pos + LOG_OVERHEAD <= len(data):
        base_offset, length = _FRAMING.unpack_from(data, pos)
        size = LOG_OVERHEAD + length
        if length <= 0 or pos + size > len(data):
            break
        spans.append(BatchSpan(path, pos, base_offset, size))
        pos += size
    return spans


def flip_bytes(path: Path, position: int, count: int = 8) -> None:
    """Invert `count` bytes in place: a media error the CRC32C must catch."""
    with open(path, "r+b") as f:
        f.seek(position)
        old = f.read(count)
        f.seek(position)
        f.write(bytes(b ^ 0xFF for b in old))


def cut_file(path: Path, size: int) -> None:
    """Truncate to `size` bytes: a torn write at a crash."""
    with open(path, "r+b") as f:
        f.truncate(size)
