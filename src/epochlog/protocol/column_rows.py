"""Records held as columns, not as a Python object each: what a producer batch keeps
when its records came in as columns (the Spark sink's Arrow batches), so that neither
queueing nor encoding them (``record_encode.encode_rows``) makes an object per record.
Free of numpy and numba when imported (``records`` imports it, and a process that only
reads a few records never loads them): the compiled encoder is loaded only when a batch
is encoded."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

NO_HEADERS: tuple[()] = ()


@dataclass(frozen=True, eq=False)
class BinaryColumn:
    """Byte strings in one buffer, Arrow's layout with the lengths spelled out: row r
    is ``lens[r]`` bytes of ``data`` from ``starts[r]``; a length of -1 is a null."""

    data: np.ndarray  # uint8
    starts: np.ndarray  # int64
    lens: np.ndarray  # int64

    @classmethod
    def of(cls, items: Sequence[bytes | None]) -> BinaryColumn:
        """Python byte strings (or None) joined into one buffer."""
        import numpy as np

        n = len(items)
        missing = items.count(None) if isinstance(items, tuple | list) else 0
        if missing:
            lens = np.fromiter((-1 if b is None else len(b) for b in items), np.int64, n)
            joined = b"".join([b for b in items if b is not None])
        else:
            lens = np.fromiter(map(len, items), np.int64, n)  # type: ignore[arg-type]
            joined = b"".join(items)  # type: ignore[arg-type]
        sizes = np.maximum(lens, 0)
        starts = np.zeros(n, np.int64)
        np.cumsum(sizes[:-1], out=starts[1:])
        return cls(np.frombuffer(joined, np.uint8), starts, lens)

    def __len__(self) -> int:
        return len(self.lens)

    def item(self, row: int) -> bytes | None:
        length = int(self.lens[row])
        if length < 0:
            return None
        start = int(self.starts[row])
        return self.data[start : start + length].tobytes()

    def rows(self, start: int, end: int) -> BinaryColumn:
        """Rows start..end-1, sharing the buffer."""
        return BinaryColumn(self.data, self.starts[start:end], self.lens[start:end])

    def sizes(self) -> np.ndarray:
        """Bytes of each row, 0 for a null."""
        import numpy as np

        return np.maximum(self.lens, 0)


class ColumnRows(Sequence[tuple[bytes | None, bytes | None, tuple[()], int]]):
    """Rows ``rows`` of a value column and an optional key column, without headers, all
    stamped ``timestamp``. Indexed, a row reads as the ``(key, value, headers,
    timestamp)`` tuple a batch of tuples holds; ``build_batch`` encodes them whole
    (``record_encode.encode_rows``)."""

    __slots__ = ("keys", "values", "rows", "timestamp")

    def __init__(
        self, keys: BinaryColumn | None, values: BinaryColumn, rows: np.ndarray, timestamp: int
    ) -> None:
        self.keys, self.values, self.rows, self.timestamp = keys, values, rows, timestamp

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> tuple[bytes | None, bytes | None, tuple[()], int]:  # type: ignore[override]
        row = int(self.rows[index])
        key = None if self.keys is None else self.keys.item(row)
        return key, self.values.item(row), NO_HEADERS, self.timestamp
