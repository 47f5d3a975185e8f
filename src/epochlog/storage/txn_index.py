"""The aborted-transaction index of one segment (Kafka's ``.txnindex``): one entry per
transaction whose ABORT marker lies in the segment, so that a read_committed fetch can
tell the consumer which producers' records to drop in the range it reads.

Entry (34 bytes, Kafka's AbortedTxn): int16 version 0, int64 producer id, int64 first
offset, int64 last offset (the marker's), int64 last stable offset when it was aborted.
The index is derived data: the log rebuilds it from the markers whenever it replays
producer state, and a damaged file is reported so that the log rebuilds it whole.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from epochlog.seams import Disk, FileHandle

TXN_INDEX_SUFFIX = ".txnindex"
_ENTRY = struct.Struct(">hqqqq")
_VERSION = 0


class TxnIndexCorrupt(Exception):
    """The file is not a whole number of valid entries."""


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TransactionIndex:
    def __init__(self, disk: Disk, path: str) -> None:
        self.disk = disk
        self.path = path
        self._file: FileHandle | None = None
        self._entries: list[AbortedTxn] | None = None

    def _handle(self) -> FileHandle:
        if self._file is None:
            self._file = self.disk.open(self.path)
        return self._file

    @property
    def entries(self) -> list[AbortedTxn]:
        """Read on first use; raises TxnIndexCorrupt on a damaged file."""
        if self._entries is None:
            self._entries = self._read()
        return self._entries

    def _read(self) -> list[AbortedTxn]:
        if not self.disk.exists(self.path):
            return []
        handle = self._handle()
        size = handle.size()
        if size % _ENTRY.size:
            raise TxnIndexCorrupt(f"{self.path}: {size} bytes is not a whole number of entries")
        data = handle.pread(size, 0) if size else b""
        out = []
        for pos in range(0, size, _ENTRY.size):
            version, producer_id, first, last, lso = _ENTRY.unpack_from(data, pos)
            if version != _VERSION or first > last or producer_id < 0:
                raise TxnIndexCorrupt(f"{self.path}: bad entry at byte {pos}")
            out.append(AbortedTxn(producer_id, first, last, lso))
        return out

    def append(self, entry: AbortedTxn) -> None:
        entries = self.entries
        if entries and entry.last_offset <= entries[-1].last_offset:
            raise ValueError(f"{self.path}: aborted transactions must come in offset order")
        self._handle().append(
            _ENTRY.pack(
                _VERSION,
                entry.producer_id,
                entry.first_offset,
                entry.last_offset,
                entry.last_stable_offset,
            )
        )
        entries.append(entry)

    def collect(self, start: int, upper: int) -> list[AbortedTxn]:
        """Transactions aborted that overlap [start, upper): a consumer reading that
        range must drop their records."""
        return [e for e in self.entries if e.last_offset >= start and e.first_offset < upper]

    def truncate_from(self, offset: int) -> None:
        """Forget transactions whose marker is at or after ``offset`` (a truncation, or a
        replay that will write them again)."""
        try:
            entries = self.entries
        except TxnIndexCorrupt:
            entries = []
        keep = [e for e in entries if e.last_offset < offset]
        if len(keep) == len(entries) and self._entries is not None:
            return
        if not keep and not self.disk.exists(self.path):
            self._entries = []
            return
        self._handle().truncate(0)
        self._entries = []
        for entry in keep:
            self.append(entry)

    def flush(self) -> None:
        if self._file is not None:
            self._file.fsync()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def delete(self) -> None:
        self.close()
        if self.disk.exists(self.path):
            self.disk.remove(self.path)
        self._entries = []
