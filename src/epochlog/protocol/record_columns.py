"""Magic 2 records sections decoded field by field into columns across every record of
many sections at once: the client's fetch path (record_fields.py).

The compiled walk (``record_walk.columns``, one pass with the GIL released) finds where
every field of every record is; numpy then makes the offsets and timestamps absolute
and drops the records below the fetch position. A fetch that hands out a few records
is decoded in Python instead (``records._decode``), so that a process that reads a
handful of records (the Spark source's planning, a console consumer) never pays for
loading numba.
Headers take a per-record path only for the records that have some. Malformed input
raises KafkaError (INVALID_RECORD), as ``epochlog.protocol.records.iter_records`` does.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from epochlog.protocol.batch import Buffer
from epochlog.protocol.errors import ErrorCode, KafkaError
from epochlog.protocol.records import _decode, decode_varint

NO_APPEND_TIME = -(2**63)


def _invalid(message: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_RECORD, message)


class Fields(NamedTuple):
    """The decoded fields of the rows handed out (records below the fetch position
    dropped), before they become Arrow columns or Python objects."""

    buf: Buffer  # bytes for the record path, which slices keys and values out of it
    arr: np.ndarray
    batch_rows: np.ndarray  # rows per data batch, in walk order
    offsets: np.ndarray
    timestamps: np.ndarray
    key_at: np.ndarray
    key_len: np.ndarray
    value_at: np.ndarray
    value_len: np.ndarray
    epochs: np.ndarray  # int32, -1 for none
    log_append_time: np.ndarray  # per data batch
    headers: Headers | None  # None: no row has headers


class Headers(NamedTuple):
    """Header keys (UTF-8 checked) and values of all rows, ``count`` per row."""

    keys: list[bytes]
    values: list[bytes | None]
    count: np.ndarray


# Up to this many records handed out, the fetch is decoded in Python: numba (about 0.3 s
# to load) stays unloaded in a process that reads a few records at a time, or one
# record out of a large batch (the Spark source's planning does).
_SCALAR_UP_TO = 64

Columns = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def decode_records(buf: Buffer, sections: np.ndarray, meta: np.ndarray) -> Fields | None:
    """Every field of every record of the ``sections`` (rows of start, end, record
    count in ``buf``; ``meta`` rows of base offset, LogAppendTime or NO_APPEND_TIME,
    base timestamp, leader epoch, fetch position); None when they hold no record."""
    counts = sections[:, 2]
    # Smallest record: a length and six one-byte fields.
    if (counts * 7 > sections[:, 1] - sections[:, 0]).any():
        raise _invalid("more records than a batch's bytes can hold")
    # Offset deltas run 0..count-1 in every batch a broker accepts: enough to choose.
    base, position = meta[:, 0], meta[:, 4]
    handed_out = np.maximum(base + counts - np.maximum(base, position), 0).sum()
    if handed_out <= _SCALAR_UP_TO:
        buf, columns, headers = _decode_one_by_one(buf, sections)
    else:
        columns, headers = _decode_compiled(buf, sections)
    ts_delta, offset_delta, key_at, key_len, value_at, value_len = columns
    if not ts_delta.size:
        return None
    batch_of = np.repeat(np.arange(counts.size), counts)
    offsets = np.repeat(meta[:, 0], counts) + offset_delta
    append_time = meta[:, 1]
    if (append_time == NO_APPEND_TIME).all():
        timestamps = np.repeat(meta[:, 2], counts) + ts_delta
    else:
        # With LogAppendTime every record carries the batch's maxTimestamp.
        per_record = np.repeat(append_time, counts)
        timestamps = np.where(
            per_record == NO_APPEND_TIME, np.repeat(meta[:, 2], counts) + ts_delta, per_record
        )
    keep = offsets >= np.repeat(meta[:, 4], counts)
    if not keep.all():
        index = np.flatnonzero(keep)
        batch_of, offsets, timestamps = batch_of[index], offsets[index], timestamps[index]
        key_at, key_len = key_at[index], key_len[index]
        value_at, value_len = value_at[index], value_len[index]
        if headers is not None:
            headers = take_headers(headers, index)
    rows = np.bincount(batch_of, minlength=counts.size)
    return Fields(
        buf,
        np.frombuffer(buf, dtype=np.uint8),
        rows,
        offsets,
        timestamps,
        key_at,
        key_len,
        value_at,
        value_len,
        np.repeat(meta[:, 3].astype(np.int32), rows),
        append_time != NO_APPEND_TIME,
        headers,
    )


def take_headers(headers: Headers, index: np.ndarray) -> Headers | None:
    """The headers of the rows at ``index`` only."""
    starts = np.zeros(headers.count.size + 1, dtype=np.int64)
    np.cumsum(headers.count, out=starts[1:])
    count = headers.count[index]
    if not count.any():
        return None
    keys: list[bytes] = []
    values: list[bytes | None] = []
    for i in index[count > 0].tolist():
        lo, hi = int(starts[i]), int(starts[i + 1])
        keys.extend(headers.keys[lo:hi])
        values.extend(headers.values[lo:hi])
    return Headers(keys, values, count)


def _decode_compiled(buf: Buffer, sections: np.ndarray) -> tuple[Columns, Headers | None]:
    from epochlog.protocol import record_walk  # numba loads with the first large fetch

    out = np.empty((8, int(sections[:, 2].sum())), dtype=np.int64)
    fault, row = record_walk.columns(np.frombuffer(buf, dtype=np.uint8), sections, out)
    if fault == record_walk.TRAILING_BYTES:
        raise _invalid(f"bytes after a batch's last record (record {row} of the fetch)")
    if fault != record_walk.OK:
        raise _invalid(f"record {row} of the fetch does not decode")
    ts_delta, offset_delta, key_at, key_len, value_at, value_len, headers_at, header_count = out
    headers = _headers(buf, headers_at, header_count) if header_count.any() else None
    return (ts_delta, offset_delta, key_at, key_len, value_at, value_len), headers


def _headers(buf: Buffer, headers_at: np.ndarray, header_count: np.ndarray) -> Headers:
    """The headers of the records that have some (the compiled walk checked them)."""
    keys: list[bytes] = []
    values: list[bytes | None] = []
    for i in np.flatnonzero(header_count).tolist():
        pos = int(headers_at[i])
        for _ in range(int(header_count[i])):
            size, pos = decode_varint(buf, pos)
            keys.append(bytes(buf[pos : pos + size]))
            pos += size
            size, pos = decode_varint(buf, pos)
            if size >= 0:
                values.append(buf[pos : pos + size])
                pos += size
            else:
                values.append(None)
    return Headers(keys, values, header_count)


def _decode_one_by_one(buf: Buffer, sections: np.ndarray) -> tuple[bytes, Columns, Headers | None]:
    """The same columns from the Python decoder, over a new buffer of the keys and
    values (the decoder hands out copies, not positions)."""
    if type(buf) is not bytes:  # (a fetch answer's view) the decoder wants bytes
        buf = bytes(buf)
    pieces: list[bytes] = []
    at = 0
    rows: list[tuple[int, int, int, int, int, int]] = []
    keys: list[bytes] = []
    values: list[bytes | None] = []
    per_record: list[int] = []
    for start, end, count in sections.tolist():
        # Base offset and timestamp 0: the decoder's offsets and timestamps are deltas.
        for record in _decode(buf, start, end, count, 0, 0, None):
            key_at, key_len = at, -1 if record.key is None else len(record.key)
            if record.key is not None:
                pieces.append(record.key)
                at += key_len
            value_at, value_len = at, -1 if record.value is None else len(record.value)
            if record.value is not None:
                pieces.append(record.value)
                at += value_len
            rows.append((record.timestamp, record.offset, key_at, key_len, value_at, value_len))
            per_record.append(len(record.headers))
            for name, value in record.headers:
                keys.append(name.encode())
                values.append(value)
    table = np.array(rows, dtype=np.int64).reshape(-1, 6).T
    headers = Headers(keys, values, np.array(per_record, dtype=np.int64)) if keys else None
    return b"".join(pieces), tuple(table), headers  # type: ignore[return-value]
