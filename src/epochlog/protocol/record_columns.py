"""Magic 2 records sections decoded field by field, vectorised across every record
of many sections at once, with numpy: the client's fetch path (record_fields.py).

The only sequential dependency in a records section is the chain of record starts.
Records of a batch mostly come in runs of one size, so the chain is found a run at a
time; what does not fit is walked record by record over the length varints alone.
Every field of every record is then decoded at once: varints as gathered bytes plus
continuation-bit masks, zig-zag. Headers take a per-record path only for the records
that have some. Malformed input raises KafkaError (INVALID_RECORD), as
``epochlog.protocol.records.iter_records`` does.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from epochlog.protocol.errors import ErrorCode, KafkaError
from epochlog.protocol.records import _ZZ, decode_varint

NO_APPEND_TIME = -(2**63)


def _invalid(message: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_RECORD, message)


# Rounds of guessing that a section's remaining records all have the size of the
# next one, before the rest of a section is walked record by record.
_GUESS_ROUNDS = 6


def _gather(arr: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """``arr[pos]``, positions past the end reading its last byte (never raising)."""
    return np.take(arr, pos, mode="clip")


def record_starts(buf: bytes, arr: np.ndarray, bounds: np.ndarray) -> np.ndarray:
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


def decode_records(
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
        arr,
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
                key = bytes(buf[pos : pos + size])
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
