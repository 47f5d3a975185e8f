"""Sparse offset and time indexes of one segment, in Kafka's on-disk formats.

``.index``: (relative offset int32, position int32) big-endian entries.
``.timeindex``: (timestamp int64, relative offset int32) entries.

Memory matters (a broker holds many GiB of log in little RSS): only the active segment
keeps its entries in an ``array``; sealed segments answer lookups by binary search over
the file with ``pread``, a handful of small reads per lookup.

The active segment's new entries reach the files in groups, both indexes at once
(``LogSegment``, every ``WRITE_BEHIND_ENTRIES``), and all of them at a flush, a seal, a
truncation or a close. A batch of 4 KiB or more gets an entry in each index, and each
was a ``pwrite`` of its own beside the batch's. What a crash leaves unwritten is a
shorter index, still a correct sparse one; a log not shut down cleanly rebuilds its
active segment's indexes anyway.
"""

from __future__ import annotations

import struct
from abc import ABC, abstractmethod
from array import array
from bisect import bisect_left, bisect_right

import numpy as np

from epochlog.seams import Disk, FileHandle

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
# Entries a segment keeps in memory before writing both indexes' (512 bytes of offsets).
WRITE_BEHIND_ENTRIES = 64


class IndexCorrupt(Exception):
    """An index file failed its sanity check and must be rebuilt from the log."""


class _SparseIndex(ABC):
    """Shared machinery: append-only file of fixed-size sorted entries."""

    entry: struct.Struct

    def __init__(self, disk: Disk, path: str, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self._file: FileHandle = disk.open(path)
        self._keys: array | None = None
        self._values: array | None = None
        # Entries in memory and not yet in the file (only while loaded).
        self._unwritten = bytearray()

    def _check_size(self) -> None:
        size = self._file.size()
        if size % self.entry.size:
            raise IndexCorrupt(f"{self.path}: size {size} is not a multiple of {self.entry.size}")

    @property
    def entries(self) -> int:
        if self._keys is not None:  # loaded: every entry is in memory
            return len(self._keys)
        return (self._file.size() + len(self._unwritten)) // self.entry.size

    def load(self) -> None:
        """Keep entries in memory (the active segment, looked up on every fetch)."""
        if self._keys is not None:
            return
        keys = array("q")
        values = array("q")
        data = self._file.pread(self._file.size(), 0)
        for key, value in self._iter_raw(data):
            keys.append(key)
            values.append(value)
        self._keys, self._values = keys, values

    def unload(self) -> None:
        """Drop the in-memory copy (segment sealed); lookups then read the file."""
        self.write_unwritten()
        self._keys = self._values = None

    @abstractmethod
    def _iter_raw(self, data: bytes) -> list[tuple[int, int]]:
        """Decode packed entries into (key, value) pairs."""

    def _append_raw(self, key: int, value: int, packed: bytes) -> None:
        if self._keys is None or self._values is None:
            self._file.append(packed)
            return
        self._keys.append(key)
        self._values.append(value)
        self._unwritten += packed

    @property
    def unwritten_entries(self) -> int:
        return len(self._unwritten) // self.entry.size

    def write_unwritten(self) -> None:
        if self._unwritten:
            self._file.append(self._unwritten)
            self._unwritten = bytearray()

    def entry_at(self, i: int) -> tuple[int, int]:
        if self._keys is not None and self._values is not None:
            return self._keys[i], self._values[i]
        raw = self._file.pread(self.entry.size, i * self.entry.size)
        return self._iter_raw(raw)[0]

    def _floor(self, key: int) -> int:
        """Index of the last entry whose key is <= ``key``, or -1."""
        if self._keys is not None:  # keys only grow: bisect in C, every fetch comes here
            return bisect_right(self._keys, key) - 1
        lo, hi = 0, self.entries - 1
        found = -1
        while lo <= hi:
            mid = (lo + hi) // 2
            if self.entry_at(mid)[0] <= key:
                found = mid
                lo = mid + 1
            else:
                hi = mid - 1
        return found

    def last_entry(self) -> tuple[int, int] | None:
        n = self.entries
        return self.entry_at(n - 1) if n else None

    def truncate_entries(self, count: int) -> None:
        self.write_unwritten()
        self._file.truncate(count * self.entry.size)
        if self._keys is not None and self._values is not None:
            del self._keys[count:]
            del self._values[count:]

    def reset(self) -> None:
        self.truncate_entries(0)

    def flush(self) -> None:
        self.write_unwritten()
        self._file.fsync()

    def close(self) -> None:
        self.write_unwritten()
        self._file.close()


class OffsetIndex(_SparseIndex):
    """Maps an offset to the file position of a batch at or before it."""

    entry = _OFFSET_ENTRY

    def _iter_raw(self, data: bytes) -> list[tuple[int, int]]:
        return [(self.base_offset + rel, pos) for rel, pos in self.entry.iter_unpack(data)]

    def append(self, offset: int, position: int) -> None:
        """Index the batch at ``position`` whose last offset is ``offset``."""
        self._append_raw(offset, position, self.entry.pack(offset - self.base_offset, position))

    def lookup(self, offset: int) -> tuple[int, int]:
        """(indexed offset, position) of the last entry <= offset, else (base, 0).

        Scanning forward from the position finds the batch containing ``offset``.
        """
        i = self._floor(offset)
        if i < 0:
            return self.base_offset, 0
        return self.entry_at(i)

    def floor_position(self, position: int, below_offset: int) -> tuple[int, int] | None:
        """The last entry at or before ``position`` whose batch ends before ``below_offset``.

        Bounds the header scan when a read stops at a byte or offset limit.
        """
        if self._keys is not None and self._values is not None:
            # Offsets and positions both grow: the entry before the first past either.
            found = min(bisect_right(self._values, position), bisect_left(self._keys, below_offset))
            return (self._keys[found - 1], self._values[found - 1]) if found else None
        lo, hi, found = 0, self.entries - 1, -1
        while lo <= hi:
            mid = (lo + hi) // 2
            offset, pos = self.entry_at(mid)
            if pos <= position and offset < below_offset:
                found = mid
                lo = mid + 1
            else:
                hi = mid - 1
        return self.entry_at(found) if found >= 0 else None

    def entries_before_position(self, position: int) -> int:
        """How many entries point before ``position`` (to cut the file there)."""
        if self._values is not None:
            return bisect_left(self._values, position)
        lo, hi = 0, self.entries
        while lo < hi:
            mid = (lo + hi) // 2
            if self.entry_at(mid)[1] < position:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def truncate_to_offset(self, offset: int) -> None:
        """Drop entries for batches that end at or after ``offset``."""
        self.truncate_entries(self._floor(offset - 1) + 1)

    def sanity_check(self, log_size: int) -> None:
        """Every entry, not only the last (Kafka's check): offsets and positions strictly
        increase and stay inside the segment, so no lookup can land outside a file or
        go backwards. Whether entries point at batches is checked by the segment."""
        self._check_size()
        entries = self._all_entries()
        if not entries.size:
            return
        offsets, positions = entries[:, 0], entries[:, 1]
        if offsets[0] < 0 or positions[0] < 0 or positions[-1] >= max(log_size, 1):
            raise IndexCorrupt(f"{self.path}: an entry lies outside the segment")
        if (np.diff(offsets) <= 0).any() or (np.diff(positions) <= 0).any():
            raise IndexCorrupt(f"{self.path}: entries out of order")

    def _all_entries(self) -> np.ndarray:
        """(relative offset, position) rows."""
        data = self._file.pread(self._file.size(), 0)
        return np.frombuffer(data, dtype=">i4").reshape(-1, 2).astype(np.int64)


class TimeIndex(_SparseIndex):
    """Maps a timestamp to an offset no later than the first record at or after it.

    Each entry is (max timestamp so far, offset of the batch that set it); entries only
    ever grow in timestamp.
    """

    entry = _TIME_ENTRY

    def _iter_raw(self, data: bytes) -> list[tuple[int, int]]:
        return [(ts, self.base_offset + rel) for ts, rel in self.entry.iter_unpack(data)]

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Append unless it would not move the max timestamp forward."""
        last = self.last_entry()
        if last is not None and (timestamp <= last[0] or offset < last[1]):
            return
        self._append_raw(timestamp, offset, self.entry.pack(timestamp, offset - self.base_offset))

    def lookup_before(self, timestamp: int) -> int:
        """An offset before which every record's timestamp is < ``timestamp``.

        Uses the last entry strictly below the target: all records up to and including
        the batch of that entry are older than it.
        """
        i = self._floor(timestamp - 1)
        if i < 0:
            return self.base_offset
        return self.entry_at(i)[1]

    def truncate_to_offset(self, offset: int) -> None:
        """Drop entries pointing at offsets >= ``offset``."""
        n = self.entries
        keep = n
        while keep > 0 and self.entry_at(keep - 1)[1] >= offset:
            keep -= 1
        if keep != n:
            self.truncate_entries(keep)

    def sanity_check(self, next_offset: int) -> None:
        """Every entry: timestamps and offsets never decrease, and offsets stay below
        the segment's ``next_offset``."""
        self._check_size()
        data = self._file.pread(self._file.size(), 0)
        if not data:
            return
        rows = np.frombuffer(data, dtype=np.dtype([("ts", ">i8"), ("rel", ">i4")]))
        stamps, offsets = rows["ts"].astype(np.int64), rows["rel"].astype(np.int64)
        if offsets[0] < 0 or self.base_offset + offsets[-1] >= max(next_offset, 1):
            raise IndexCorrupt(f"{self.path}: an entry lies outside the segment")
        if (np.diff(stamps) < 0).any() or (np.diff(offsets) < 0).any():
            raise IndexCorrupt(f"{self.path}: entries out of order")
