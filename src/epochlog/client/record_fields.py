"""Magic 2 records sections decoded field by field, vectorised across every record
of every batch of a fetch answer (for client/arrow_batches.py).

The only sequential dependency in a records section is the chain of record starts.
Records of a batch mostly come in runs of one size, so the chain is found a run at a
time with numpy; what does not fit is walked record by record over the length
varints alone. Every field of every record is then decoded at once: varints as
gathered bytes plus continuation-bit masks, zig-zag. Headers take a per-record path
only for the records that have some. Malformed input raises KafkaError, as
``epochlog.protocol.records.iter_records`` does.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

import crc32c
import numpy as np

from epochlog.protocol import batch as _batch
from epochlog.protocol.compression import decompress
from epochlog.protocol.control import read_marker
from epochlog.protocol.errors import ErrorCode, KafkaError
from epochlog.protocol.records import _ZZ, decode_varint

Buffer = bytes | bytearray | memoryview
NO_APPEND_TIME = -(2**63)


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
    # Part of an aborted transaction (read_committed): walked past, never handed out.
    aborted: bool = False

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _batch.CONTROL_BIT)

    @property
    def has_no_rows(self) -> bool:
        """A marker or an aborted transaction's batch: the position moves past it."""
        return self.aborted or bool(self.attributes & _batch.CONTROL_BIT)


_HEADER = struct.Struct(">qiibIhiqqqhii")


def walk_batches(
    data: Buffer, fetch_offset: int, aborted: list[tuple[int, int]] | None = None
) -> list[WalkedBatch]:
    """The whole batches of a fetch answer that reach past the position, in order.

    A batch that ends at or below the position so far is skipped; records of a batch
    below it are dropped (a fetch from the middle of a batch returns all of it); a
    partial batch at the end of the answer is left for the next fetch. Both the
    record path and the Arrow path hand out exactly these.

    ``aborted``: the fetch answer's aborted transactions (producer id, first offset),
    read_committed. Kafka's rule: a transaction becomes aborted for its producer at its
    first offset; that producer's transactional batches are dropped until its ABORT
    marker.
    """
    pending = sorted(aborted or (), key=lambda a: a[1])
    active: set[int] = set()
    out = []
    append = out.append
    position = fetch_offset
    at = 0
    total = len(data)
    unpack = _HEADER.unpack_from
    smallest = _batch.HEADER_SIZE - _batch.LOG_OVERHEAD
    while at + _batch.HEADER_SIZE <= total:
        base, length, epoch, magic, crc, attrs, delta, ts, max_ts, pid, _, _, count = unpack(
            data, at
        )
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
        dropped = False
        if pending or active:
            while pending and pending[0][1] <= base + delta:
                active.add(pending.pop(0)[0])
            if pid in active and attrs & _batch.TRANSACTIONAL_BIT:
                dropped = True
                if attrs & _batch.CONTROL_BIT and not read_marker(data[at:end])[0]:
                    active.discard(pid)
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
                    dropped,
                )
            )
            position = next_offset
        at = end
    return out


def decode_walked(data: bytes, walked: list[WalkedBatch], check_crc: bool) -> Fields | None:
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
        if w.has_no_rows:
            continue
        start = w.at + _batch.HEADER_SIZE
        codec = attrs & _batch.COMPRESSION_MASK
        if codec:
            compressed.append((len(sections), decompress(codec, view[start : w.end])))
        sections.append((start, w.end, w.records_count))
        meta.append(
            (
                w.base_offset,
                w.max_timestamp if attrs & _batch.TIMESTAMP_TYPE_BIT else NO_APPEND_TIME,
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
        if (bounds[:, 0] != bounds[:, 1]).any():
            raise _invalid("bytes after a batch's last record")
        return None
    return _decode_records(data, arr, starts, bounds, np.array(meta, dtype=np.int64))


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
