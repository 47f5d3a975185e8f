"""Keep aside what a truncation or a recovery removed.

Each removal becomes ``<partition dir>/quarantine/<name>.log`` holding the raw bytes as
they were on disk, plus ``<name>.json`` saying which offsets and epochs they carried,
why they were removed and when, so an operator can list them and re-produce them.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence

from epochlog.seams import Clock, Disk, FileHandle
from epochlog.storage.results import TruncatedRange
from epochlog.storage.segment import LogSegment

logger = logging.getLogger("epochlog.storage")

QUARANTINE_DIR = "quarantine"
_COPY_CHUNK = 1 << 20


class Quarantine:
    def __init__(self, disk: Disk, clock: Clock, partition_dir: str) -> None:
        self.disk = disk
        self.clock = clock
        self.directory = f"{partition_dir}/{QUARANTINE_DIR}"
        # Bytes held here (epochlog_quarantine_size_bytes): summed from the folder on
        # first use, then kept up to date by ``keep``.
        self._size: int | None = None

    def _free_stem(self, stem: str) -> str:
        candidate, n = stem, 0
        while self.disk.exists(f"{self.directory}/{candidate}.log"):
            n += 1
            candidate = f"{stem}.{n}"
        return f"{self.directory}/{candidate}"

    def keep(self, stem: str, sources: list[tuple[FileHandle, int, int]], description: dict) -> str:
        """Copy the (file, position, size) ranges into one quarantine file; returns its path.

        The copy is fsynced and described before the caller removes anything.
        """
        self.disk.makedirs(self.directory)
        base = self._free_stem(stem)
        out = self.disk.open(base + ".log")
        try:
            total = 0
            for source, position, size in sources:
                done = 0
                while done < size:
                    chunk = source.pread(min(_COPY_CHUNK, size - done), position + done)
                    if not chunk:
                        break
                    out.append(chunk)
                    done += len(chunk)
                total += done
            out.fsync()
        finally:
            out.close()
        meta = dict(description, size=total, time_ms=self.clock.time_ms(), file=base + ".log")
        self.disk.write_atomic(base + ".json", json.dumps(meta, indent=2).encode())
        if self._size is not None:
            self._size += total
        return base + ".log"

    def size_bytes(self) -> int:
        """Bytes of every record kept in this partition's quarantine."""
        if self._size is None:
            names = self.disk.listdir(self.directory) if self.disk.exists(self.directory) else []
            self._size = sum(
                self.disk.file_size(f"{self.directory}/{name}")
                for name in names
                if name.endswith(".log")
            )
        return self._size

    def list(self) -> list[dict]:
        """Descriptions of everything quarantined in this partition, oldest name first."""
        if not self.disk.exists(self.directory):
            return []
        return [
            json.loads(self.disk.read_file(f"{self.directory}/{name}"))
            for name in self.disk.listdir(self.directory)
            if name.endswith(".json")
        ]


def keep_tail(
    quarantine: Quarantine,
    segments: Sequence[LogSegment],
    offset: int,
    reason: str,
    partition: tuple[str, int],
) -> TruncatedRange:
    """Keep every batch of a partition from ``offset`` on (``segments`` from the one
    holding it) in one quarantine entry, described and logged, before a truncation
    removes them."""
    topic, index = partition
    sources = []
    epochs: list[int] = []
    first = last = None
    for segment in segments:
        found = segment.find_batch(offset)
        if found is None:
            continue
        position = found[0]
        for _, header in segment.iter_headers(position):
            first = header.base_offset if first is None else first
            last = header.last_offset
            if not epochs or epochs[-1] != header.partition_leader_epoch:
                epochs.append(header.partition_leader_epoch)
        # A hole's damaged bytes are in quarantine already, and would hide what follows.
        at = position
        for start, end in sorted(segment.holes):
            if end <= at:
                continue
            if start > at:
                sources.append((segment.file, at, start - at))
            at = max(at, end)
        if at < segment.size:
            sources.append((segment.file, at, segment.size - at))
    first = offset if first is None else first
    last = first - 1 if last is None else last
    description = {
        "topic": topic,
        "partition": index,
        "first_offset": first,
        "last_offset": last,
        "epochs": epochs,
        "reason": reason,
    }
    path = quarantine.keep(f"{first:020d}-{last:020d}", sources, description)
    size = sum(s[2] for s in sources)
    logger.warning(
        "%s-%d: %s removed offsets %d..%d (epochs %s, %d bytes); kept in %s",
        topic,
        index,
        reason,
        first,
        last,
        epochs,
        size,
        path,
    )
    return TruncatedRange(first, last, tuple(epochs), size, path)


def delete_keeping_quarantine(disk: Disk, directory: str, delete: Callable[[], None]) -> None:
    """Delete a partition's folder (``delete``) but not its quarantine: that steps aside
    while the folder goes, then comes back to where its descriptions say its files are.
    A folder left with only a quarantine loads as an empty log; one named ``.retiring``,
    left by a crash midway, is listed by the quarantine tools and never loaded."""
    aside = f"{directory}.retiring"
    disk.makedirs(aside)
    disk.rename(f"{directory}/{QUARANTINE_DIR}", f"{aside}/{QUARANTINE_DIR}")
    delete()
    disk.rename(aside, directory)
