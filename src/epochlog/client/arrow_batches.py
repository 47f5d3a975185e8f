"""Magic 2 record batches straight into one ``pyarrow.RecordBatch``, vectorised.

Why: the Spark connector and analytics want columns, and building a Python object per
record costs more than the whole columnar decode. ``record_fields`` decodes every
field of every record of a fetch answer at once with numpy; here key and value bytes
are gathered into contiguous Arrow buffers (rows of a strided window view) and the
columns built with ``pa.Array.from_buffers`` (never ``pa.array``, whose first call
imports pandas). The record path builds its Python objects from the same decode, so
both paths hand out the same records (equal to what
``epochlog.protocol.records.iter_records`` yields) and move positions alike.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from itertools import repeat
from typing import NamedTuple, TypeVar

import numpy as np
import pyarrow as pa

from epochlog.client.record_fields import Buffer, WalkedBatch, decode_walked, walk_batches
from epochlog.protocol.errors import ErrorCode, KafkaError
from epochlog.protocol.record_columns import Fields, Headers

__all__ = [
    "ARROW_SCHEMA",
    "Progress",
    "WalkedBatch",
    "decode_fetched",
    "decode_fetched_records",
    "empty_batch",
    "walk_batches",
]

T = TypeVar("T")

HEADER_TYPE = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
# Spark's Kafka source columns, plus leaderEpoch.
ARROW_SCHEMA = pa.schema(
    [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("ms", tz="UTC")),
        pa.field("timestampType", pa.int32()),
        pa.field("leaderEpoch", pa.int32()),
        pa.field("headers", pa.list_(HEADER_TYPE)),
    ]
)
CREATE_TIME = 0
LOG_APPEND_TIME = 1

_INT32_MAX = 2**31 - 1
# Up to this many rows, a record's key and value are sliced in Python: an Arrow column
# costs about 13 us before its first row (20 rows: 15 us against 2).
_SLICED_UP_TO = 256
# The padded gather of variable-length fields is used while it wastes at most this
# factor over the bytes it keeps; beyond it, slices are joined per record.
_PAD_WASTE = 4


class Progress(NamedTuple):
    """What a run of handed-out batches of one leader epoch does to the position
    (``PartitionPosition.consumed``). ``last_timestamp`` None: no row in the run."""

    next_offset: int
    leader_epoch: int
    last_timestamp: int | None
    first_offset: int


def empty_batch() -> pa.RecordBatch:
    """A RecordBatch with no rows and ``ARROW_SCHEMA``."""
    return pa.RecordBatch.from_arrays(
        [pa.nulls(0, f.type) for f in ARROW_SCHEMA], schema=ARROW_SCHEMA
    )


def decode_fetched(
    data: Buffer,
    topic: str,
    partition: int,
    fetch_offset: int,
    *,
    check_crc: bool = True,
    aborted: list[tuple[int, int]] | None = None,
) -> tuple[pa.RecordBatch, list[Progress]]:
    """Decode one partition's fetched bytes from ``fetch_offset`` into Arrow rows, with
    what they do to the consumer's position (aborted transactions dropped)."""
    # ``data`` may be a view of the Fetch answer: the columns copy out what they keep.
    walked, fields = _decode(data, fetch_offset, check_crc, aborted)
    table = empty_batch() if fields is None else _to_arrow(fields, topic, partition)
    return table, _progress(walked, fields)


def decode_fetched_records(
    data: Buffer,
    topic: str,
    partition: int,
    fetch_offset: int,
    make: Callable[..., T],
    *,
    check_crc: bool = True,
    aborted: list[tuple[int, int]] | None = None,
) -> tuple[list[T], list[Progress]]:
    """The same decode into one Python object per record:
    ``make(topic, partition, offset, timestamp, key, value, headers, leader_epoch)``,
    headers a list of (str, bytes | None) and leader_epoch None for -1."""
    if type(data) is not bytes:  # records slice their keys and values out of it
        data = bytes(data)
    walked, fields = _decode(data, fetch_offset, check_crc, aborted)
    records = [] if fields is None else _to_records(fields, topic, partition, make)
    return records, _progress(walked, fields)


def _decode(
    data: Buffer, fetch_offset: int, check_crc: bool, aborted: list[tuple[int, int]] | None
) -> tuple[list[WalkedBatch], Fields | None]:
    walked = walk_batches(data, fetch_offset, aborted)
    return walked, decode_walked(data, walked, check_crc)


def _to_arrow(f: Fields, topic: str, partition: int) -> pa.RecordBatch:
    n = f.offsets.size
    timestamp_type = np.repeat(
        np.where(f.log_append_time, LOG_APPEND_TIME, CREATE_TIME).astype(np.int32), f.batch_rows
    )
    columns = [
        _binary(f.arr, f.key_at, f.key_len),
        _binary(f.arr, f.value_at, f.value_len),
        _strings(topic, n),
        _numeric(np.full(n, partition, dtype=np.int32), pa.int32()),
        _numeric(f.offsets, pa.int64()),
        _numeric(f.timestamps, pa.timestamp("ms", tz="UTC")),
        _numeric(timestamp_type, pa.int32()),
        _numeric(f.epochs, pa.int32(), valid=f.epochs != -1),
        _no_headers(n) if f.headers is None else _header_column(f.headers),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)


def _py_bytes(
    buf: bytes, arr: np.ndarray, at: np.ndarray, length: np.ndarray
) -> list[bytes | None]:
    if not (length >= 0).any():
        return [None] * at.size
    if at.size <= _SLICED_UP_TO:
        return [
            None if n < 0 else buf[a : a + n]
            for a, n in zip(at.tolist(), length.tolist(), strict=True)
        ]
    # Through an Arrow column: its to_pylist makes the bytes objects in C++.
    return _binary(arr, at, length).to_pylist()


def _to_records(f: Fields, topic: str, partition: int, make: Callable[..., T]) -> list[T]:
    n = f.offsets.size
    collecting = gc.isenabled()
    # Millions of new objects would set off the cyclic collector over and over (it
    # would take most of the time); none of them can be part of a cycle.
    gc.disable()
    try:
        if f.headers is None:
            headers: list[list[tuple[str, bytes | None]]] = [[] for _ in range(n)]
        else:
            keys = [k.decode() for k in f.headers.keys]
            pairs = list(zip(keys, f.headers.values, strict=True))
            headers = []
            at = 0
            for count in f.headers.count.tolist():
                headers.append(pairs[at : at + count])
                at += count
        epochs = f.epochs.tolist()
        if -1 in epochs:
            epochs = [None if e == -1 else e for e in epochs]
        return list(
            map(
                make,
                repeat(topic, n),
                repeat(partition, n),
                f.offsets.tolist(),
                f.timestamps.tolist(),
                _py_bytes(f.buf, f.arr, f.key_at, f.key_len),
                _py_bytes(f.buf, f.arr, f.value_at, f.value_len),
                headers,
                epochs,
            )
        )
    finally:
        if collecting:
            gc.enable()


def _numeric(values: np.ndarray, kind: pa.DataType, valid: np.ndarray | None = None) -> pa.Array:
    """A primitive column over the numpy array's memory (``pa.array`` would import
    pandas, over a second, on its first call)."""
    validity, nulls = _validity(valid) if valid is not None else (None, 0)
    data = pa.py_buffer(np.ascontiguousarray(values))
    return pa.Array.from_buffers(kind, values.size, [validity, data], null_count=nulls)


def _validity(valid: np.ndarray) -> tuple[pa.Buffer | None, int]:
    nulls = int(valid.size - np.count_nonzero(valid))
    if not nulls:
        return None, 0
    return pa.py_buffer(np.packbits(valid, bitorder="little")), nulls


def _binary(arr: np.ndarray, at: np.ndarray, length: np.ndarray) -> pa.Array:
    """A binary column of ``arr[at:at+length]`` per row; length -1 is null."""
    n = at.size
    sizes = np.maximum(length, 0)
    ends = np.cumsum(sizes)
    total = int(ends[-1]) if n else 0
    if total > _INT32_MAX:
        raise KafkaError(ErrorCode.INVALID_RECORD, f"{total} bytes of keys or values in one fetch")
    offsets = np.zeros(n + 1, dtype=np.int32)
    offsets[1:] = ends
    validity, nulls = _validity(length >= 0)
    widest = int(sizes.max()) if n else 0
    if total == 0:
        data = b""
    elif widest * n <= _PAD_WASTE * total + 4096 and int(at.max()) + widest <= arr.size:
        # Rows of a sliding window view: one row copy per record, in C.
        rows = np.lib.stride_tricks.sliding_window_view(arr, widest)[at]
        uniform = int(sizes.min()) == widest
        data = rows if uniform else rows[np.arange(widest) < sizes[:, None]]
    else:
        raw = arr.data
        data = b"".join([raw[a : a + s] for a, s in zip(at.tolist(), sizes.tolist(), strict=True)])
    return pa.Array.from_buffers(
        pa.binary(),
        n,
        [validity, pa.py_buffer(offsets), pa.py_buffer(np.ascontiguousarray(data))],
        null_count=nulls,
    )


def _strings(text: str, n: int) -> pa.Array:
    """The same string on every row, without a Python object per row."""
    raw = text.encode()
    offsets = np.arange(n + 1, dtype=np.int64) * len(raw)
    if n and int(offsets[-1]) > _INT32_MAX:
        raise KafkaError(ErrorCode.INVALID_RECORD, "topic column too large")
    return pa.Array.from_buffers(
        pa.string(), n, [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(raw * n)]
    )


_NO_HEADER_ITEMS = pa.nulls(0, HEADER_TYPE)


def _no_headers(n: int) -> pa.Array:
    return pa.ListArray.from_arrays(
        _numeric(np.zeros(n + 1, dtype=np.int32), pa.int32()), _NO_HEADER_ITEMS
    )


def _header_column(headers: Headers) -> pa.Array:
    offsets = np.zeros(headers.count.size + 1, dtype=np.int32)
    np.cumsum(headers.count, out=offsets[1:])
    children = pa.StructArray.from_arrays(
        [_listed(headers.keys, pa.string()), _listed(headers.values, pa.binary())],
        fields=list(HEADER_TYPE),
    )
    return pa.ListArray.from_arrays(_numeric(offsets, pa.int32()), children)


def _listed(items: list[bytes | None], kind: pa.DataType) -> pa.Array:
    """A string or binary column from a list (None is null), without ``pa.array``."""
    sizes = np.fromiter((-1 if x is None else len(x) for x in items), np.int64, len(items))
    offsets = np.zeros(len(items) + 1, dtype=np.int32)
    np.cumsum(np.maximum(sizes, 0), out=offsets[1:])
    validity, nulls = _validity(sizes >= 0)
    data = pa.py_buffer(b"".join([x for x in items if x is not None]))
    return pa.Array.from_buffers(
        kind, len(items), [validity, pa.py_buffer(offsets), data], null_count=nulls
    )


def _progress(walked: list[WalkedBatch], fields: Fields | None) -> list[Progress]:
    """What the handed-out batches do to the position, one entry per run of batches
    of one leader epoch (only the last batch of a run moves the position, only the
    first one can start a new epoch in its history)."""
    if fields is None:
        rows: list[int] = []
        offsets = timestamps = np.zeros(0, dtype=np.int64)
    else:
        rows = fields.batch_rows.tolist()
        offsets, timestamps = fields.offsets, fields.timestamps
    progress: list[Progress] = []
    row = 0
    k = 0
    last_epoch = None
    first = next_offset = 0
    timestamp = None
    for w in walked:
        if w.has_no_rows:
            got = 0
            start = w.base_offset
        else:
            got = rows[k] if rows else 0  # no rows at all: batches without records
            k += 1
            start = int(offsets[row]) if got else w.threshold
        if w.leader_epoch != last_epoch:
            if last_epoch is not None:
                progress.append(Progress(next_offset, last_epoch, timestamp, first))
            last_epoch, first, timestamp = w.leader_epoch, start, None
        if got:
            row += got
            timestamp = int(timestamps[row - 1])
        elif timestamp is not None:
            # The record path carries "the last timestamp or -1" through empty batches.
            timestamp = timestamp or -1
        next_offset = w.next_offset
    if last_epoch is not None:
        progress.append(Progress(next_offset, last_epoch, timestamp, first))
    return progress
