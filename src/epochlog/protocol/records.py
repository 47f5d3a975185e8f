"""Records inside a magic 2 batch: decode, validate as a broker does on produce, build.

Record => length varint, attributes int8, timestampDelta varlong, offsetDelta varint,
key (varint length, -1 for null), value (likewise), headers (varint count, then per
header a varint-length UTF-8 key and a nullable varint-length value). Every varint is
zig-zag encoded. The records section follows the 61-byte batch header and is
compressed as a whole when the batch's attributes say so.

Decoding is a hot path: the loop inlines the one-byte varint case (by far the most
common) and keeps everything in local variables; malformed input of any kind surfaces
as a ``KafkaError``, never as an IndexError or similar.
"""

from __future__ import annotations

import functools
import operator
import struct
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import crc32c

from epochlog.protocol import batch as _batch
from epochlog.protocol.batch import Buffer
from epochlog.protocol.column_rows import ColumnRows, RecordLists
from epochlog.protocol.compression import compress as _compress
from epochlog.protocol.compression import decompress
from epochlog.protocol.errors import ErrorCode, KafkaError

Header = tuple[str, bytes | None]


@dataclass(slots=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


# --- varints (zig-zag), shared by the decoder and the builder ----------------------

# Zig-zag decoded value of every one- and two-byte varint, indexed by the raw 14 bits:
# the decoder inlines those two cases, which cover lengths up to 8 KiB.
_ZZ = tuple((v >> 1) ^ -(v & 1) for v in range(1 << 14))
# Encoded bytes of every value whose zig-zag form fits one byte (-64..63).
# Every one- and two-byte varint, indexed by value + _SMALL_BIAS: the producer's hot path
# (offset deltas, timestamp deltas, lengths) is almost always in this range.
_SMALL_BIAS = 8192


def _encode_varint_slow(value: int) -> bytes:
    v = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


_SMALL = [_encode_varint_slow(v) for v in range(-_SMALL_BIAS, _SMALL_BIAS)]
_VARINT_MAX_BYTES = 5
_VARLONG_MAX_BYTES = 10


def _varint_tail(buf: Buffer, pos: int, max_bytes: int) -> tuple[int, int]:
    """Decode a varint of any length at ``pos``; may raise IndexError at the end of buf."""
    result = 0
    shift = 0
    limit = 7 * max_bytes
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift >= limit:
            raise KafkaError(ErrorCode.INVALID_RECORD, f"varint longer than {max_bytes} bytes")


def decode_varint(buf: Buffer, pos: int = 0, *, long: bool = False) -> tuple[int, int]:
    """Zig-zag varint (or varlong) at ``pos`` -> (value, position after it)."""
    try:
        return _varint_tail(buf, pos, _VARLONG_MAX_BYTES if long else _VARINT_MAX_BYTES)
    except IndexError:
        raise KafkaError(ErrorCode.INVALID_RECORD, "varint cut short") from None


def encode_varint(value: int) -> bytes:
    """Zig-zag varint (or varlong: the encoding is the same) of a signed 64-bit value."""
    if -_SMALL_BIAS <= value < _SMALL_BIAS:
        return _SMALL[value + _SMALL_BIAS]
    return _encode_varint_slow(value)


def varint_size(value: int) -> int:
    """Bytes ``encode_varint(value)`` takes."""
    v = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    return max(1, (v.bit_length() + 6) // 7)


# --- decoding ----------------------------------------------------------------------


def _invalid(message: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_RECORD, message)


def _decode(
    data: bytes,
    pos: int,
    end: int,
    count: int,
    base_offset: int,
    base_timestamp: int,
    append_time: int | None,
) -> Iterator[Record]:
    """Yield ``count`` records from ``data[pos:end]``, then insist nothing is left."""
    zz = _ZZ
    tail = _varint_tail
    record = Record
    try:
        for _ in range(count):
            b = data[pos]
            if b < 0x80:
                length = zz[b]
                pos += 1
            else:
                c = data[pos + 1]
                if c < 0x80:
                    length = zz[(b & 0x7F) | (c << 7)]
                    pos += 2
                else:
                    length, pos = tail(data, pos, 5)
            record_end = pos + length
            # Smallest record: attributes and five one-byte varints.
            if length < 6 or record_end > end:
                raise _invalid(f"record length {length} at byte {pos} of {end}")
            # Record attributes (pos) are unused by every Kafka version so far.
            b = data[pos + 1]
            if b < 0x80:
                timestamp_delta = zz[b]
                pos += 2
            else:
                c = data[pos + 2]
                if c < 0x80:
                    timestamp_delta = zz[(b & 0x7F) | (c << 7)]
                    pos += 3
                else:
                    timestamp_delta, pos = tail(data, pos + 1, 10)
            b = data[pos]
            if b < 0x80:
                offset_delta = zz[b]
                pos += 1
            else:
                c = data[pos + 1]
                if c < 0x80:
                    offset_delta = zz[(b & 0x7F) | (c << 7)]
                    pos += 2
                else:
                    offset_delta, pos = tail(data, pos, 5)
            b = data[pos]
            if b < 0x80:
                size = zz[b]
                pos += 1
            else:
                c = data[pos + 1]
                if c < 0x80:
                    size = zz[(b & 0x7F) | (c << 7)]
                    pos += 2
                else:
                    size, pos = tail(data, pos, 5)
            if size >= 0:
                key = data[pos : pos + size]
                pos += size
            elif size == -1:
                key = None
            else:
                raise _invalid(f"key length {size}")
            b = data[pos]
            if b < 0x80:
                size = zz[b]
                pos += 1
            else:
                c = data[pos + 1]
                if c < 0x80:
                    size = zz[(b & 0x7F) | (c << 7)]
                    pos += 2
                else:
                    size, pos = tail(data, pos, 5)
            if size >= 0:
                value = data[pos : pos + size]
                pos += size
            elif size == -1:
                value = None
            else:
                raise _invalid(f"value length {size}")
            b = data[pos]
            if b == 0:
                headers = []
                pos += 1
            else:
                if b < 0x80:
                    n_headers = zz[b]
                    pos += 1
                else:
                    n_headers, pos = tail(data, pos, 5)
                # Each header takes at least two bytes.
                if n_headers < 0 or 2 * n_headers > record_end - pos:
                    raise _invalid(f"header count {n_headers}")
                headers = []
                for _ in range(n_headers):
                    size, pos = tail(data, pos, 5)
                    if size < 0:
                        raise _invalid(f"header key length {size}")
                    header_key = data[pos : pos + size].decode()
                    pos += size
                    size, pos = tail(data, pos, 5)
                    if size >= 0:
                        headers.append((header_key, data[pos : pos + size]))
                        pos += size
                    elif size == -1:
                        headers.append((header_key, None))
                    else:
                        raise _invalid(f"header value length {size}")
                    if pos > record_end:
                        break
            if pos != record_end:
                raise _invalid(
                    f"record declared {length} bytes, its fields take {pos - record_end + length}"
                )
            yield record(
                base_offset + offset_delta,
                base_timestamp + timestamp_delta if append_time is None else append_time,
                key,
                value,
                headers,
            )
    except (IndexError, ValueError) as exc:  # UnicodeDecodeError is a ValueError
        raise _invalid(f"malformed record: {exc}") from exc
    if pos != end:
        raise _invalid(f"{end - pos} bytes after the batch's last record")


def iter_records(batch: Buffer, *, check_crc: bool = True) -> Iterator[Record]:
    """Decode the records of one whole batch (header included), decompressing if needed.

    Offsets and timestamps come out absolute. With LogAppendTime every record carries
    the batch's maxTimestamp, as Kafka's own readers report it. Errors are raised as
    KafkaError: CORRUPT_MESSAGE for the batch (header, CRC, compression) and
    INVALID_RECORD for the records inside, as Kafka's broker classifies them.
    """
    header = _batch.validate_batch(batch) if check_crc else _batch.read_header(batch)
    size = header.size
    if size > len(batch):
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "record batch cut short")
    if header.records_count < 0:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"record count {header.records_count}")
    codec = header.attributes & _batch.COMPRESSION_MASK
    if codec:
        data = decompress(codec, memoryview(batch)[_batch.HEADER_SIZE : size])
        pos, end = 0, len(data)
    elif type(batch) is bytes:
        data, pos, end = batch, _batch.HEADER_SIZE, size
    else:
        data, pos, end = bytes(memoryview(batch)[:size]), _batch.HEADER_SIZE, size
    append_time = header.max_timestamp if header.is_log_append_time else None
    return _decode(
        data,
        pos,
        end,
        header.records_count,
        header.base_offset,
        header.base_timestamp,
        append_time,
    )


def validate_records(batch: Buffer) -> None:
    """Check what Kafka's broker checks on produce before accepting a batch: header
    count and offset range agree, offset deltas run 0..n-1 in order, every length is
    consistent. Raises INVALID_RECORD (CORRUPT_MESSAGE for a bad header or CRC)."""
    header = _batch.validate_batch(batch)
    count = header.records_count
    if count <= 0:
        raise _invalid(f"record count {count}: a produced batch holds records")
    if header.last_offset_delta != count - 1:
        raise _invalid(
            f"last offset delta {header.last_offset_delta} does not match {count} records"
        )
    expected = header.base_offset
    for rec in iter_records(batch, check_crc=False):
        if rec.offset != expected:
            raise _invalid(
                f"record offset delta {rec.offset - header.base_offset}, "
                f"expected {expected - header.base_offset}"
            )
        expected += 1


# --- building ----------------------------------------------------------------------

# Up to this many records the Python encoder is as quick as the compiled one with its
# columns to gather, and a client of small batches never pays for loading numba.
_SCALAR_UP_TO = 64
_HEADER_STRUCT = struct.Struct(">qiibIhiqqqhii")
_CRC_STRUCT = struct.Struct(">I")
_EMPTY_HEADER = bytes(_batch.HEADER_SIZE)


def _fields(rec: Any) -> tuple[Any, Any, Iterable[tuple[Any, Any]], Any]:
    if isinstance(rec, tuple):
        return rec
    return rec.key, rec.value, rec.headers, rec.timestamp


def build_batch(
    records: Sequence[tuple[bytes | None, bytes | None, Iterable[Header], int | None]]
    | Sequence[Any],
    **options: Any,
) -> bytes:
    """``build_batch_view``'s batch as bytes (``options``: its keywords)."""
    return bytes(build_batch_view(records, **options))


def build_batch_view(
    records: Sequence[tuple[bytes | None, bytes | None, Iterable[Header], int | None]]
    | Sequence[Any],
    *,
    base_offset: int = 0,
    compression: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = -1,
    is_transactional: bool = False,
    is_control: bool = False,
    timestamp_type_log_append: bool = False,
    now_ms: int | None = None,
) -> memoryview:
    """Encode records as one magic 2 batch with a correct CRC32C, as a view of the
    buffer it was encoded in: the producer sends it as it is (a megabyte's copy into
    fresh memory, its page faults included, was a fifth of a Spark sink task's CPU).

    ``records`` holds ``(key, value, headers, timestamp)`` tuples or objects with those
    attributes (``Record``); offsets are assigned 0..n-1 from ``base_offset``. A None
    timestamp means ``now_ms`` (from the caller's Clock). Header keys may be str or bytes.
    """
    if not records:
        raise ValueError("a record batch needs at least one record")
    if isinstance(records, ColumnRows):
        compiled = _encoder().encode_rows(records, _batch.HEADER_SIZE)
    elif len(records) > _SCALAR_UP_TO:
        compiled = _compiled_section(records)
    else:
        compiled = None
    # The batch is written into ``framed`` when the compiled encoder left the header's
    # room in front of the records: no copy of them but the final bytes().
    framed: Any = None
    if compiled is not None:
        framed, base_timestamp, max_timestamp = compiled
        body: bytes | memoryview = memoryview(framed)[_batch.HEADER_SIZE :]
    else:
        body, base_timestamp, max_timestamp = _records_section(records, now_ms)
    count = len(records)
    if compression:
        body = _compress(compression, bytes(body))
        framed = None
    attributes = compression
    if timestamp_type_log_append:
        attributes |= _batch.TIMESTAMP_TYPE_BIT
    if is_transactional:
        attributes |= _batch.TRANSACTIONAL_BIT
    if is_control:
        attributes |= _batch.CONTROL_BIT
    if framed is None:
        out = bytearray(_EMPTY_HEADER)
        out += body
    else:
        out = framed
    _HEADER_STRUCT.pack_into(
        out,
        0,
        base_offset,
        len(out) - _batch.LOG_OVERHEAD,
        partition_leader_epoch,
        2,
        0,
        attributes,
        count - 1,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    )
    _CRC_STRUCT.pack_into(out, _batch.CRC, crc32c.crc32c(memoryview(out)[_batch.ATTRIBUTES :]))
    return memoryview(out)


def _records_section(records: Sequence[Any], now_ms: int | None) -> tuple[bytes, int, int]:
    """The records section in Python: (bytes, base timestamp, max timestamp)."""
    pieces: list[bytes] = []
    add = pieces.append
    extend = pieces.extend
    enc = encode_varint
    small, bias = _SMALL, _SMALL_BIAS
    base_timestamp = max_timestamp = None
    for index, rec in enumerate(records):
        key, value, headers, timestamp = rec if type(rec) is tuple else _fields(rec)
        if timestamp is None:
            if now_ms is None:
                raise ValueError("a record without a timestamp needs now_ms")
            timestamp = now_ms
        if base_timestamp is None:
            base_timestamp = max_timestamp = timestamp
        elif timestamp > max_timestamp:
            max_timestamp = timestamp
        delta = timestamp - base_timestamp
        ts = small[delta + bias] if -bias <= delta < bias else enc(delta)
        od = small[index + bias] if index < bias else enc(index)
        if not headers and value is not None:
            # The common record, written straight into the body: attributes, deltas,
            # key, value, no headers; its length is added up instead of joined first.
            lv = len(value)
            vl = small[lv + bias] if lv < bias else enc(lv)
            if key is None:
                n = 3 + len(ts) + len(od) + len(vl) + lv
                add(small[n + bias] if n < bias else enc(n))
                extend((b"\x00", ts, od, b"\x01", vl, value, b"\x00"))
            else:
                lk = len(key)
                kl = small[lk + bias] if lk < bias else enc(lk)
                n = 2 + len(ts) + len(od) + len(kl) + lk + len(vl) + lv
                add(small[n + bias] if n < bias else enc(n))
                extend((b"\x00", ts, od, kl, key, vl, value, b"\x00"))
            continue
        # attributes, timestamp delta, offset delta; then key, value, headers
        fields = [b"\x00", ts, od]
        if key is None:
            fields.append(b"\x01")
        else:
            fields += (enc(len(key)), key)
        if value is None:
            fields.append(b"\x01")
        else:
            fields += (enc(len(value)), value)
        if not headers:
            fields.append(b"\x00")
        else:
            headers = list(headers)
            fields.append(enc(len(headers)))
            for header_key, header_value in headers:
                if isinstance(header_key, str):
                    header_key = header_key.encode()
                fields += (enc(len(header_key)), header_key)
                if header_value is None:
                    fields.append(b"\x01")
                else:
                    fields += (enc(len(header_value)), header_value)
        record = b"".join(fields)
        add(enc(len(record)))
        add(record)
    assert base_timestamp is not None and max_timestamp is not None
    return b"".join(pieces), base_timestamp, max_timestamp


def _compiled_section(records: Sequence[Any]) -> tuple[Any, int, int] | None:
    """``_records_section`` by the compiled encoder, for records without headers and
    with their timestamps (``RecordLists``, or tuples), after a batch header's room
    (``encode_records``); None for any other (the Python encoder's)."""
    if type(records) is RecordLists:
        if records.headed:
            return None
        keys = records.all_keys() if records.keyed else None
        try:
            return _encoder().encode_records(
                keys, records.values, records.stamps_ns, _batch.HEADER_SIZE, in_ns=True
            )
        except OverflowError:  # a timestamp given past 2262, beyond int64 in nanoseconds
            return None
    if type(records[0]) is not tuple:
        return None
    # Column by column, not zip(*records): that holds an iterator per record, which a
    # collection during the zip promotes, and enough promoted objects bring on full
    # collections of the whole heap (38% of a producer's time, py-spy, gc.callbacks).
    headers = list(map(_HEADERS, records))
    stamps = list(map(_TIMESTAMP, records))
    if any(headers) or None in stamps:
        return None
    keys = list(map(_KEY, records))
    if keys.count(None) == len(keys):
        keys = None  # no column of nulls to build
    values = list(map(_VALUE, records))
    return _encoder().encode_records(keys, values, stamps, _batch.HEADER_SIZE)


_KEY, _VALUE, _HEADERS, _TIMESTAMP = map(operator.itemgetter, range(4))


@functools.cache
def _encoder() -> ModuleType:
    """``record_encode``, imported (and numba loaded) only once a large batch is built."""
    from epochlog.protocol import record_encode

    return record_encode
