"""Magic 2 record batches straight into one ``pyarrow.RecordBatch``, vectorised.

Why: the Spark connector and analytics want columns, and building a Python object per
record (the record path) costs more than the whole columnar decode. The only
sequential dependency in a records section is the chain of record starts, so a tight
loop walks the record-length varints alone; every field of every record of every
batch of a fetch is then decoded at once with numpy (varints as gathered bytes plus
continuation-bit masks, zig-zag), key and value bytes are gathered into contiguous
Arrow buffers (rows of a strided window view) and the columns are built with
``pa.Array.from_buffers``. Headers take a per-record fallback only for records that
have some. The rows equal what ``epochlog.protocol.records.iter_records`` yields.

Which batches are decoded (``walk_batches``) is shared with the record path, so both
skip the same batches and records below the fetch position.
"""

from __future__ import annotations

import gc
import struct
from collections.abc import Callable
from itertools import repeat
from typing import NamedTuple, TypeVar

import crc32c
import numpy as np
import pyarrow as pa

from epochlog.protocol import batch as _batch
from epochlog.protocol.compression import decompress
from epochlog.protocol.errors import ErrorCode, KafkaError
from epochlog.protocol.records import _ZZ, decode_varint

Buffer = bytes | bytearray | memoryview
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
# The padded gather of variable-length fields is used while it wastes at most this
# factor over the bytes it keeps; beyond it, slices are joined per record.
_PAD_WASTE = 4


def _invalid(message: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_RECORD, message)


class WalkedBatch(NamedTuple):
    """One whole batch of a fetch answer to hand out: records from ``threshold`` on."""

    at: int
    end: int
    base_offset: int
    next_offset: int
    leader_epoch: int
    attributes: int
    crc: int
    records_count: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    threshold: int

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _batch.CONTROL_BIT)


_HEADER = struct.Struct(">qiibIhiqqqhii")


def walk_batches(data: Buffer, fetch_offset: int) -> list[WalkedBatch]:
    """The whole batches of a fetch answer that reach past the position, in order.

    A batch that ends at or below the position so far is skipped; records of a batch
    below it are dropped (a fetch from the middle of a batch returns all of it); a
    partial batch at the end of the answer is left for the next fetch. Both the
    record path and the Arrow path hand out exactly these.
    """
    out = []
    append = out.append
    position = fetch_offset
    at = 0
    total = len(data)
    unpack = _HEADER.unpack_from
    smallest = _batch.HEADER_SIZE - _batch.LOG_OVERHEAD
    while at + _batch.HEADER_SIZE <= total:
        base, length, epoch, magic, crc, attrs, delta, ts, max_ts, _, _, _, count = unpack(data, at)
        if magic != 2:
            raise KafkaError(
                ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT, f"record batch magic {magic}, not 2"
            )
        if length < smallest:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"batch length {length}")
        end = at + length + _batch.LOG_OVERHEAD
        if end > total:
            break
        next_offset = base + delta + 1
        if next_offset > position:
            append(
                WalkedBatch(
                    at,
                    end,
                    base,
                    next_offset,
                    epoch,
                    attrs,
                    crc,
                    count,
                    delta,
                    ts,
                    max_ts,
                    position,
                )
            )
            position = next_offset
        at = end
    return out


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
) -> tuple[pa.RecordBatch, list[Progress]]:
    """Decode one partition's fetched bytes from ``fetch_offset`` into Arrow rows, with
    what they do to the consumer's position."""
    walked, fields = _decode(data, fetch_offset, check_crc)
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
) -> tuple[list[T], list[Progress]]:
    """The same decode into one Python object per record:
    ``make(topic, partition, offset, timestamp, key, value, headers, leader_epoch)``,
    headers a list of (str, bytes | None) and leader_epoch None for -1."""
    walked, fields = _decode(data, fetch_offset, check_crc)
    records = [] if fields is None else _to_records(fields, topic, partition, make)
    return records, _progress(walked, fields)


def _decode(
    data: Buffer, fetch_offset: int, check_crc: bool
) -> tuple[list[WalkedBatch], Fields | None]:
    if type(data) is not bytes:
        data = bytes(data)
    walked = walk_batches(data, fetch_offset)
    return walked, _decode_walked(data, walked, check_crc)


def _decode_walked(data: bytes, walked: list[WalkedBatch], check_crc: bool) -> Fields | None:
    """Every record of the batches ``walk_batches`` picked (control batches have none)."""
    view = memoryview(data)
    sections: list[tuple[int, int, int]] = []  # start, end, count in ``data``
    meta: list[tuple[int, int, int, int, int]] = []
    compressed: list[tuple[int, bytes]] = []  # (index in sections, decompressed records)
    crc32 = crc32c.crc32c
    attributes_at = _batch.ATTRIBUTES
    for w in walked:
        if w.records_count < 0 or w.last_offset_delta < 0:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "negative record count or offset delta")
        if check_crc and crc32(view[w.at + attributes_at : w.end]) != w.crc:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "record batch CRC32C mismatch")
        attrs = w.attributes
        if attrs & _batch.CONTROL_BIT:
            continue
        start = w.at + _batch.HEADER_SIZE
        codec = attrs & _batch.COMPRESSION_MASK
        if codec:
            compressed.append((len(sections), decompress(codec, view[start : w.end])))
        sections.append((start, w.end, w.records_count))
        meta.append(
            (
                w.base_offset,
                w.max_timestamp if attrs & _batch.TIMESTAMP_TYPE_BIT else _NO_APPEND_TIME,
                w.base_timestamp,
                w.leader_epoch,
                w.threshold,
            )
        )
    if compressed:
        # Uncompressed records stay where they are; decompressed ones go after them.
        pieces: list[Buffer] = [data]
        joined = len(data)
        for index, records in compressed:
            sections[index] = (joined, joined + len(records), sections[index][2])
            pieces.append(records)
            joined += len(records)
        data = b"".join(pieces)
    if not sections:
        return None
    bounds = np.array(sections, dtype=np.int64).reshape(-1, 3)
    arr = np.frombuffer(data, dtype=np.uint8)
    starts = _record_starts(data, arr, bounds)
    if not starts.size:
        return None
    return _decode_records(data, arr, starts, bounds, np.array(meta, dtype=np.int64))


_NO_APPEND_TIME = -(2**63)
# Rounds of guessing that a section's remaining records all have the size of the
# next one, before the rest of a section is walked record by record.
_GUESS_ROUNDS = 6


def _gather(arr: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """``arr[pos]``, positions past the end reading its last byte (never raising)."""
    return np.take(arr, pos, mode="clip")


def _record_starts(buf: bytes, arr: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """Where each record's length varint starts: the one sequential dependency.

    Records of a batch mostly come in runs of one size, so each round guesses that the
    rest of every unfinished section repeats the size of its next record and checks
    the guess at once: a record has the size of another exactly when its length
    varint has the same bytes. The guess holds up to the first record whose size
    differs, which starts the next round. Sections still unfinished after a few rounds
    are walked record by record. Whether the chain ends exactly at each section's end
    is checked by the caller.
    """
    first_byte, last_byte, counts = bounds[:, 0], bounds[:, 1], bounds[:, 2]
    if (counts * 7 > last_byte - first_byte).any():
        raise _invalid("more records than a batch's bytes can hold")
    base = np.zeros(counts.size + 1, dtype=np.int64)
    np.cumsum(counts, out=base[1:])
    out = np.empty(int(base[-1]), dtype=np.int64)
    live = np.flatnonzero(counts > 0)
    cur = first_byte[live]
    done = np.zeros(live.size, dtype=np.int64)
    slow: list[tuple[int, int, int]] = []  # (section, position, records placed)
    for _ in range(_GUESS_ROUNDS):
        if not live.size:
            break
        b0 = _gather(arr, cur)
        b1 = _gather(arr, cur + 1)
        one = b0 < 0x80
        raw = np.where(one, b0, (b0 & 0x7F) | (b1.astype(np.int64) << 7)).astype(np.int64)
        size = ((raw >> 1) ^ -(raw & 1)) + 2 - one
        # Lengths of three bytes or more (records of 8 KiB and up) are walked one by one.
        plain = one | (b1 < 0x80)
        if (size[plain] < 7).any():
            raise _invalid("record length out of bounds")
        if not plain.all():
            odd = np.flatnonzero(~plain)
            slow.extend(zip(live[odd].tolist(), cur[odd].tolist(), done[odd].tolist(), strict=True))
            live, cur, done = live[plain], cur[plain], done[plain]
            size, b0, b1, one = size[plain], b0[plain], b1[plain], one[plain]
        left = counts[live] - done
        group = np.repeat(np.arange(live.size), left)
        first_of = np.zeros(live.size, dtype=np.int64)
        np.cumsum(left[:-1], out=first_of[1:])
        j = np.arange(group.size, dtype=np.int64) - first_of[group]
        guess = cur[group] + size[group] * j
        same = _gather(arr, guess) == b0[group]
        same &= one[group] | (_gather(arr, guess + 1) == b1[group])
        # The first record of each section whose size is not the guessed one starts
        # where guessed; it opens the next round.
        placed = left.copy()
        differs = np.flatnonzero(~same)
        if differs.size:
            owners = group[differs]
            first = np.ones(differs.size, dtype=bool)
            first[1:] = owners[1:] != owners[:-1]
            placed[owners[first]] = j[differs[first]]
        take = np.flatnonzero(j < placed[group])
        owner = group[take]
        out[base[live[owner]] + done[owner] + j[take]] = guess[take]
        cur = cur + size * placed
        done = done + placed
        unfinished = done < counts[live]
        live, cur, done = live[unfinished], cur[unfinished], done[unfinished]
    slow.extend(zip(live.tolist(), cur.tolist(), done.tolist(), strict=True))
    try:
        zz = _ZZ
        for section, pos, placed in slow:
            starts: list[int] = []
            append = starts.append
            for _ in range(int(counts[section]) - placed):
                append(pos)
                b = buf[pos]
                if b < 0x80:
                    pos += zz[b] + 1
                else:
                    c = buf[pos + 1]
                    if c < 0x80:
                        pos += zz[(b & 0x7F) | (c << 7)] + 2
                    else:
                        length, pos = decode_varint(buf, pos)
                        pos += length
            at = int(base[section]) + placed
            out[at : at + len(starts)] = starts
    except IndexError:
        raise _invalid("record lengths run past the batch") from None
    return out


def _varints(
    arr: np.ndarray, pos: np.ndarray, max_bytes: int
) -> tuple[np.ndarray, np.ndarray | int]:
    """Zig-zag varints at every ``pos`` at once -> (values, bytes taken: 1 when all
    take one byte, the common case for everything but lengths over 63)."""
    b = _gather(arr, pos)
    more = b >= 0x80
    if not more.any():
        value = b.astype(np.int64)
        return (value >> 1) ^ -(value & 1), 1
    value = (b & 0x7F).astype(np.int64)
    size = np.ones(pos.size, dtype=np.int64)
    shift = 7
    for k in range(1, max_bytes):
        b = _gather(arr, pos + k)
        value |= np.where(more, (b & 0x7F).astype(np.int64) << shift, 0)
        size += more
        more &= b >= 0x80
        if not more.any():
            break
        shift += 7
    else:
        raise _invalid(f"varint longer than {max_bytes} bytes")
    return (value >> 1) ^ -(value & 1), size


class Fields(NamedTuple):
    """The decoded fields of the rows handed out (records below the fetch position
    dropped), before they become Arrow columns or Python objects."""

    buf: bytes
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


def _decode_records(
    buf: bytes,
    arr: np.ndarray,
    starts: np.ndarray,
    bounds: np.ndarray,
    meta: np.ndarray,
) -> Fields:
    """Every field of every record at once."""
    counts = bounds[:, 2]
    batch_of = np.repeat(np.arange(counts.size), counts)
    length, size = _varints(arr, starts, 5)
    body = starts + size
    record_end = body + length
    if (length < 6).any() or (record_end > np.repeat(bounds[:, 1], counts)).any():
        raise _invalid("record length out of bounds")
    # Records are chained, so a batch holds exactly its records when the last one
    # ends where the batch does.
    full = counts > 0
    if (record_end[np.cumsum(counts)[full] - 1] != bounds[full, 1]).any() or (
        bounds[~full, 0] != bounds[~full, 1]
    ).any():
        raise _invalid("bytes after a batch's last record")
    # Record attributes (at ``body``) are unused by every Kafka version so far.
    ts_delta, size = _varints(arr, body + 1, 10)
    at = body + 1 + size
    offset_delta, size = _varints(arr, at, 5)
    at += size
    key_len, size = _varints(arr, at, 5)
    key_at = at + size
    at = key_at + np.maximum(key_len, 0)
    value_len, size = _varints(arr, at, 5)
    value_at = at + size
    at = value_at + np.maximum(value_len, 0)
    if (key_len < -1).any() or (value_len < -1).any() or (at >= record_end).any():
        raise _invalid("key or value length out of bounds")
    header_count, size = _varints(arr, at, 5)
    at += size
    headers = None
    with_headers = np.flatnonzero(header_count)
    if with_headers.size:
        headers, at = _headers(buf, at, record_end, header_count, with_headers)
    if (at != record_end).any():
        bad = int(np.flatnonzero(at != record_end)[0])
        raise _invalid(
            f"record declared {int(length[bad])} bytes, its fields take {int(at[bad] - body[bad])}"
        )

    offsets = np.repeat(meta[:, 0], counts) + offset_delta
    append_time = meta[:, 1]
    if (append_time == _NO_APPEND_TIME).all():
        timestamps = np.repeat(meta[:, 2], counts) + ts_delta
    else:
        # With LogAppendTime every record carries the batch's maxTimestamp.
        per_record = np.repeat(append_time, counts)
        timestamps = np.where(
            per_record == _NO_APPEND_TIME, np.repeat(meta[:, 2], counts) + ts_delta, per_record
        )
    keep = offsets >= np.repeat(meta[:, 4], counts)
    if not keep.all():
        index = np.flatnonzero(keep)
        batch_of, offsets, timestamps = batch_of[index], offsets[index], timestamps[index]
        key_at, key_len = key_at[index], key_len[index]
        value_at, value_len = value_at[index], value_len[index]
        if headers is not None:
            headers = _take_headers(headers, index)
    rows = np.bincount(batch_of, minlength=counts.size)
    return Fields(
        buf,
        arr,
        rows,
        offsets,
        timestamps,
        key_at,
        key_len,
        value_at,
        value_len,
        np.repeat(meta[:, 3].astype(np.int32), rows),
        append_time != _NO_APPEND_TIME,
        headers,
    )


def _take_headers(headers: Headers, index: np.ndarray) -> Headers | None:
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


def _py_bytes(arr: np.ndarray, at: np.ndarray, length: np.ndarray) -> list[bytes | None]:
    if not (length >= 0).any():
        return [None] * at.size
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
                _py_bytes(f.arr, f.key_at, f.key_len),
                _py_bytes(f.arr, f.value_at, f.value_len),
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
        raise _invalid(f"{total} bytes of keys or values in one fetch")
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
        raise _invalid("topic column too large")
    return pa.Array.from_buffers(
        pa.string(), n, [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(raw * n)]
    )


_NO_HEADER_ITEMS = pa.nulls(0, HEADER_TYPE)


def _no_headers(n: int) -> pa.Array:
    return pa.ListArray.from_arrays(
        _numeric(np.zeros(n + 1, dtype=np.int32), pa.int32()), _NO_HEADER_ITEMS
    )


def _headers(
    buf: bytes,
    at: np.ndarray,
    record_end: np.ndarray,
    header_count: np.ndarray,
    has_headers: np.ndarray,
) -> tuple[Headers, np.ndarray]:
    """The per-record fallback for records with headers; returns the column and where
    each record's fields end."""
    at = at.copy()
    keys: list[bytes] = []
    values: list[bytes | None] = []
    per_record = np.zeros(at.size, dtype=np.int64)
    try:
        for i in has_headers.tolist():
            count = int(header_count[i])
            pos = int(at[i])
            end = int(record_end[i])
            if count < 0 or 2 * count > end - pos:
                raise _invalid(f"header count {count}")
            for _ in range(count):
                size, pos = decode_varint(buf, pos)
                if size < 0:
                    raise _invalid(f"header key length {size}")
                key = buf[pos : pos + size]
                key.decode()  # header keys are UTF-8, as iter_records insists
                keys.append(key)
                pos += size
                size, pos = decode_varint(buf, pos)
                if size >= 0:
                    values.append(buf[pos : pos + size])
                    pos += size
                elif size == -1:
                    values.append(None)
                else:
                    raise _invalid(f"header value length {size}")
                if pos > end:
                    break
            at[i] = pos
            per_record[i] = count
    except ValueError as exc:  # UnicodeDecodeError
        raise _invalid(f"malformed header: {exc}") from exc
    return Headers(keys, values, per_record), at


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
        if w.is_control:
            got = 0
            start = w.base_offset
        else:
            got = rows[k]
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
