"""Records held as columns, not as a Python object each: what a producer batch keeps,
as lists while it is open (``RecordLists``) or as Arrow's buffers when its records came
in as columns (``ColumnRows``: the Spark sink's batches), so that neither queueing nor
encoding them (``record_encode``) makes an object per record.
Free of numpy and numba when imported (``records`` imports it, and a process that only
reads a few records never loads them): the compiled encoder is loaded only when a batch
is encoded."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import TYPE_CHECKING, Any

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


class RecordLists(Sequence[tuple[bytes | None, bytes | None, Any, int]]):
    """Records as four lists (keys, values, headers, timestamps) instead of a tuple
    each: what an open producer batch keeps, so that a record is added by four list
    appends (no object a record; ``AsyncProducer.send``'s hot path appends to the lists
    itself, no call) and ``build_batch`` hands the columns to the compiled encoder as
    they are.
    Indexed, a record reads as its ``(key, value, headers, timestamp)`` tuple; timestamps
    are always given (the producer stamps them), headers are ``()`` when there are none."""

    __slots__ = ("keys", "values", "headers", "timestamps")

    def __init__(self) -> None:
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.headers: list[Any] = []
        self.timestamps: list[int] = []

    @property
    def keyed(self) -> bool:
        """Some key is not null (asked once a batch, at C speed)."""
        return self.keys.count(None) != len(self.keys)

    @property
    def headed(self) -> bool:
        """Some record has headers."""
        return self.headers.count(NO_HEADERS) != len(self.headers)

    def append(self, key: bytes | None, value: bytes | None, headers: Any, timestamp: int) -> None:
        self.keys.append(key)
        self.values.append(value)
        self.headers.append(headers)
        self.timestamps.append(timestamp)

    def extend(self, keys: Sequence[bytes] | None, values: Sequence[bytes], timestamp: int) -> None:
        """Records of ``values`` and ``keys`` (None: all null), without headers, all
        stamped ``timestamp``."""
        n = len(values)
        self.values.extend(values)
        if keys is None:
            self.keys.extend(repeat(None, n))
        else:
            self.keys.extend(keys)
        self.headers.extend(repeat(NO_HEADERS, n))
        self.timestamps.extend(repeat(timestamp, n))

    def __len__(self) -> int:
        return len(self.values)

    def __iter__(self) -> Iterator[tuple[bytes | None, bytes | None, Any, int]]:
        return zip(self.keys, self.values, self.headers, self.timestamps, strict=True)

    def __getitem__(self, index: int) -> tuple[bytes | None, bytes | None, Any, int]:  # type: ignore[override]
        return self.keys[index], self.values[index], self.headers[index], self.timestamps[index]
