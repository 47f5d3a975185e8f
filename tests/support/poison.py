"""Record batches whose header and CRC32C are right around records no reader can use:
what a broker must refuse at produce time (Kafka's LogValidator)."""

from __future__ import annotations

import struct

import cramjam
import crc32c

from epochlog.protocol.batch import HEADER_SIZE, LOG_OVERHEAD
from epochlog.protocol.compression import GZIP, LZ4, SNAPPY, ZSTD, compress
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.records import encode_varint

_HEADER = struct.Struct(">qiibIhiqqqhii")
TIMESTAMP = 1_700_000_000_000


def record(offset_delta: int, value: bytes | None, key: bytes | None = b"k") -> bytes:
    """One magic 2 record, no headers."""

    def sized(data: bytes | None) -> bytes:
        return encode_varint(-1) if data is None else encode_varint(len(data)) + data

    body = b"\x00" + encode_varint(offset_delta) + encode_varint(offset_delta)
    body += sized(key) + sized(value) + encode_varint(0)
    return encode_varint(len(body)) + body


def section(count: int, start: int = 0) -> bytes:
    return b"".join(record(start + i, b"value-%d" % i) for i in range(count))


def forged_batch(records: bytes, count: int, codec: int = 0) -> bytes:
    """A batch around ``records`` (already compressed if ``codec``) with a right CRC."""
    length = HEADER_SIZE - LOG_OVERHEAD + len(records)
    head = bytearray(
        _HEADER.pack(0, length, -1, 2, 0, codec, count - 1, TIMESTAMP, TIMESTAMP, -1, -1, -1, count)
    )
    body = bytes(head[21:]) + records
    struct.pack_into(">I", head, 17, crc32c.crc32c(body))
    return bytes(head[:21]) + body


GARBAGE = bytes(range(7, 250, 3)) * 3


def poison_batches() -> dict[str, tuple[bytes, ErrorCode]]:
    """Name -> (batch, the error a broker answers)."""
    good = section(3)
    bad_middle = section(2) + b"\x7f" + b"\x00" * 5 + section(1, 3)
    return {
        "garbage-varints": (forged_batch(b"\xff" * 40, 3), ErrorCode.INVALID_RECORD),
        "record-cut-mid-way": (forged_batch(bad_middle, 4), ErrorCode.INVALID_RECORD),
        "offset-delta-gap": (
            forged_batch(record(0, b"a") + record(2, b"b"), 2),
            ErrorCode.INVALID_RECORD,
        ),
        "fewer-records-than-count": (forged_batch(good, 5), ErrorCode.INVALID_RECORD),
        "gzip-garbage": (forged_batch(GARBAGE, 3, GZIP), ErrorCode.CORRUPT_MESSAGE),
        "snappy-garbage": (forged_batch(GARBAGE, 3, SNAPPY), ErrorCode.CORRUPT_MESSAGE),
        "lz4-garbage": (forged_batch(GARBAGE, 3, LZ4), ErrorCode.CORRUPT_MESSAGE),
        "zstd-garbage": (forged_batch(GARBAGE, 3, ZSTD), ErrorCode.CORRUPT_MESSAGE),
        "gzip-of-garbage-records": (
            forged_batch(compress(GZIP, b"\xff" * 40), 3, GZIP),
            ErrorCode.INVALID_RECORD,
        ),
        "codec-7": (forged_batch(good, 3, 7), ErrorCode.UNSUPPORTED_COMPRESSION_TYPE),
        "codec-5": (forged_batch(good, 3, 5), ErrorCode.UNSUPPORTED_COMPRESSION_TYPE),
    }


def gzip_bomb(size: int = 64 << 20) -> bytes:
    """About 65 KB of gzip that decompresses to ``size`` zero bytes, in one batch."""
    return forged_batch(bytes(cramjam.gzip.compress(bytes(size))), 1000, GZIP)
