"""Kafka's fixed-layout (non-flexible) field encodings, for the internal topics' record
keys and values (``__consumer_offsets``, ``__transaction_state``): big-endian integers,
int16-length strings, int32-length bytes. A read past the end is CORRUPT_MESSAGE."""

from __future__ import annotations

import struct

from epochlog.protocol.errors import ErrorCode, KafkaError


class FieldWriter:
    def __init__(self) -> None:
        self.buf = bytearray()

    def int8(self, v: int) -> FieldWriter:
        self.buf += struct.pack(">b", v)
        return self

    def int16(self, v: int) -> FieldWriter:
        self.buf += struct.pack(">h", v)
        return self

    def int32(self, v: int) -> FieldWriter:
        self.buf += struct.pack(">i", v)
        return self

    def int64(self, v: int) -> FieldWriter:
        self.buf += struct.pack(">q", v)
        return self

    def string(self, v: str | None) -> FieldWriter:
        if v is None:
            return self.int16(-1)
        raw = v.encode()
        self.int16(len(raw))
        self.buf += raw
        return self

    def blob(self, v: bytes | None) -> FieldWriter:
        if v is None:
            return self.int32(-1)
        self.int32(len(v))
        self.buf += v
        return self


class FieldReader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _take(self, fmt: str, size: int) -> int:
        if self.pos + size > len(self.data):
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "record cut short")
        (v,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return int(v)

    def int8(self) -> int:
        return self._take(">b", 1)

    def int16(self) -> int:
        return self._take(">h", 2)

    def int32(self) -> int:
        return self._take(">i", 4)

    def int64(self) -> int:
        return self._take(">q", 8)

    def _raw(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "record cut short")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return bytes(out)

    def nullable_string(self) -> str | None:
        n = self.int16()
        return None if n < 0 else self._raw(n).decode()

    def string(self) -> str:
        return self.nullable_string() or ""

    def blob(self) -> bytes:
        n = self.int32()
        return b"" if n < 0 else self._raw(n)
