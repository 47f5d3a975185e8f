"""Every length and count of a request checked against its schema before decoding.

kafka.protocol's generated decoders read a negative array count other than -1 as an
empty array, and a negative string or bytes length as null even where the schema does
not allow null. Kafka's own decoders refuse both (and any length past the frame). This
walk reads only lengths, counts and fixed-size fields, following the same schema
(Kafka's JSON message definitions, as kafka.protocol loads them), and raises
LengthError at the first one Kafka would refuse.
"""

from __future__ import annotations

import struct
from typing import Any

from kafka.protocol.schemas.fields import ArrayField, SimpleField, StructField

_FIXED_SIZES = {
    "int8": 1,
    "bool": 1,
    "int16": 2,
    "uint16": 2,
    "int32": 4,
    "uint32": 4,
    "int64": 8,
    "float64": 8,
    "uuid": 16,
}
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


class LengthError(ValueError):
    """A length or count Kafka forbids, or one that runs past the frame."""


def audit(schema: StructField, version: int, flexible: bool, data: memoryview) -> int:
    """Walk a request body; returns where it ends. Raises LengthError."""
    return _Walk(version, flexible, data).struct(schema, 0)


class _Walk:
    def __init__(self, version: int, flexible: bool, data: memoryview) -> None:
        self.version = version
        self.flexible = flexible
        self.data = data
        self.size = len(data)

    def struct(self, schema: StructField, pos: int) -> int:
        for field in schema.untagged_fields(self.version):
            pos = self.field(field, pos)
        if self.flexible:
            pos = self.tagged(pos)
        return pos

    def field(self, field: Any, pos: int) -> int:
        if isinstance(field, ArrayField):
            count, pos = self.length(pos, wide=True)
            if count < 0:
                return self.null(field, count, pos)
            if count > self.size - pos:
                raise LengthError(
                    f"{field.name}: {count} elements run past the frame ({self.size - pos} bytes)"
                )
            element = field.array_of
            for _ in range(count):
                pos = self.element(element, pos)
            return pos
        if isinstance(field, StructField):
            if field.nullable_for_version_q(self.version):
                (present,) = self.take(pos, 1)
                pos += 1
                if present == 0xFF:
                    return pos
            return self.struct(field, pos)
        return self.element(field, pos)

    def element(self, element: Any, pos: int) -> int:
        if isinstance(element, StructField):
            return self.struct(element, pos)
        assert isinstance(element, SimpleField), element
        kind = element.type_str
        fixed = _FIXED_SIZES.get(kind)
        if fixed is not None:
            self.take(pos, fixed)
            return pos + fixed
        length, pos = self.length(pos, wide=kind != "string")
        if length < 0:
            return self.null(element, length, pos)
        self.take(pos, length)
        return pos + length

    def null(self, field: Any, value: int, pos: int) -> int:
        if value == -1 and field.nullable_for_version_q(self.version):
            return pos
        raise LengthError(f"{field.name}: length {value} where Kafka allows none")

    def length(self, pos: int, wide: bool) -> tuple[int, int]:
        """A length or count: compact (unsigned varint, plus one) in flexible versions,
        else int32 (arrays, bytes) or int16 (strings)."""
        if self.flexible:
            value, pos = self.uvarint(pos)
            return value - 1, pos
        if wide:
            return _INT32.unpack(self.take(pos, 4))[0], pos + 4
        return _INT16.unpack(self.take(pos, 2))[0], pos + 2

    def tagged(self, pos: int) -> int:
        count, pos = self.uvarint(pos)
        for _ in range(count):
            _tag, pos = self.uvarint(pos)
            size, pos = self.uvarint(pos)
            self.take(pos, size)
            pos += size
        return pos

    def uvarint(self, pos: int) -> tuple[int, int]:
        value = 0
        for shift in range(0, 35, 7):
            (byte,) = self.take(pos, 1)
            pos += 1
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value, pos
        raise LengthError(f"varint longer than 5 bytes at byte {pos}")

    def take(self, pos: int, size: int) -> memoryview:
        if pos + size > self.size:
            raise LengthError(f"{size} bytes at byte {pos} run past the frame ({self.size})")
        return self.data[pos : pos + size]
