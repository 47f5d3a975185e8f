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
from itertools import chain, repeat
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

NO_HEADERS: tuple[()] = ()
NS_PER_MS = 1_000_000


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
    """Records as lists, not a tuple each: what an open producer batch keeps, so that a
    record is added by a few list appends (no object a record; ``AsyncProducer.send``'s
    hot path appends to the lists itself, no call) and ``build_batch`` hands the columns
    to the compiled encoder as they are.
    Kept as short as the hot path can make them: ``keys`` runs only up to the last
    record that has a key and ``headers`` up to the last that has headers (the records
    after are null-keyed, header-less: nothing appended for them), and ``stamps_ns`` are
    the timestamps as the clock gives them, in nanoseconds (made milliseconds when read:
    no division a record). Indexed, a record reads as its ``(key, value, headers,
    timestamp)`` tuple, timestamp in milliseconds, headers ``()`` when there are none."""

    __slots__ = ("keys", "values", "headers", "stamps_ns")

    def __init__(self) -> None:
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.headers: list[Any] = []
        self.stamps_ns: list[int] = []

    @property
    def keyed(self) -> bool:
        """Some key is not null."""
        return bool(self.keys)

    @property
    def headed(self) -> bool:
        """Some record has headers."""
        return bool(self.headers)

    def append(self, key: bytes | None, value: bytes | None, headers: Any, timestamp: int) -> None:
        self.values.append(value)
        self.stamps_ns.append(timestamp * NS_PER_MS)
        if key is not None:
            self.set_key(key)
        if headers:
            _set_last(self.headers, NO_HEADERS, headers, len(self.values))

    def set_key(self, key: bytes) -> None:
        """The last record's key (one with none is null)."""
        _set_last(self.keys, None, key, len(self.values))

    def extend(self, keys: Sequence[bytes] | None, values: Sequence[bytes], timestamp: int) -> None:
        """Records of ``values`` and ``keys`` (None: all null), without headers, all
        stamped ``timestamp``."""
        n = len(values)
        if keys is not None:
            self.keys.extend(repeat(None, len(self.values) - len(self.keys)))
            self.keys.extend(keys)
        self.values.extend(values)
        self.stamps_ns.extend(repeat(timestamp * NS_PER_MS, n))

    def all_keys(self) -> list[bytes | None]:
        """A key for every record."""
        return self.keys + [None] * (len(self.values) - len(self.keys))

    def __len__(self) -> int:
        return len(self.values)

    def __iter__(self) -> Iterator[tuple[bytes | None, bytes | None, Any, int]]:
        n, keys, headers = len(self.values), self.keys, self.headers
        return zip(
            chain(keys, repeat(None, n - len(keys))),
            self.values,
            chain(headers, repeat(NO_HEADERS, n - len(headers))),
            (stamp // NS_PER_MS for stamp in self.stamps_ns),
            strict=True,
        )

    def __getitem__(self, index: int) -> tuple[bytes | None, bytes | None, Any, int]:  # type: ignore[override]
        value = self.values[index]  # (raises IndexError first)
        index %= len(self.values)
        keys, headers = self.keys, self.headers
        return (
            keys[index] if index < len(keys) else None,
            value,
            headers[index] if index < len(headers) else NO_HEADERS,
            self.stamps_ns[index] // NS_PER_MS,
        )


def _set_last(column: list[Any], filler: Any, item: Any, records: int) -> None:
    """``item`` for the last of ``records``, ``column`` padded with ``filler`` up to it."""
    column.extend(repeat(filler, records - 1 - len(column)))
    column.append(item)
