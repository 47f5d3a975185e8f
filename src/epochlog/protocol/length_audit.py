"""Every length and count of a request checked against its schema before decoding.

kafka.protocol's generated decoders read a negative array count other than -1 as an
empty array, and a negative string or bytes length as null even where the schema does
not allow null. Kafka's own decoders refuse both (and any length past the frame). This
walk reads only lengths, counts and fixed-size fields, following the same schema
(Kafka's JSON message definitions, as kafka.protocol loads them), and raises
LengthError at the first one Kafka would refuse.

Every request pays for it, so the walk of each (schema, version) is generated once as
one flat Python function, as kafka.protocol compiles its decoders: a schema walked
field by field at run time cost a Produce several times as much.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
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

Walk = Callable[[memoryview, int], int]


class LengthError(ValueError):
    """A length or count Kafka forbids, or one that runs past the frame."""


def audit(schema: StructField, version: int, flexible: bool, data: memoryview) -> int:
    """Walk a request body; returns where it ends. Raises LengthError."""
    key = (schema.name, version, flexible)
    walk = _COMPILED.get(key)
    if walk is None:
        walk = _COMPILED[key] = _compile(schema, version, flexible)
    return walk(data, len(data))


# (request schema's name, version, flexible) -> its walk. Schemas are not hashable; each
# request's name is its own (produce_request, fetch_request, ...).
_COMPILED: dict[tuple[str, int, bool], Walk] = {}


# -- what the generated code calls ------------------------------------------------------


def _past(size: int, pos: int, end: int) -> LengthError:
    return LengthError(f"{size} bytes at byte {pos} run past the frame ({end})")


def _null(name: str, value: int) -> LengthError:
    return LengthError(f"{name}: length {value} where Kafka allows none")


def _elements_past(name: str, count: int, room: int) -> LengthError:
    return LengthError(f"{name}: {count} elements run past the frame ({room} bytes)")


def _uvarint(data: memoryview, pos: int, end: int) -> tuple[int, int]:
    value = 0
    for shift in range(0, 35, 7):
        if pos >= end:
            raise _past(1, pos, end)
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
    raise LengthError(f"varint longer than 5 bytes at byte {pos}")


def _tagged(data: memoryview, pos: int, end: int) -> int:
    count, pos = _uvarint(data, pos, end)
    for _ in range(count):
        _tag, pos = _uvarint(data, pos, end)
        size, pos = _uvarint(data, pos, end)
        if pos + size > end:
            raise _past(size, pos, end)
        pos += size
    return pos


_HELPERS: dict[str, Any] = {
    "_past": _past,
    "_null": _null,
    "_elements_past": _elements_past,
    "_uvarint": _uvarint,
    "_tagged": _tagged,
    "_i16": _INT16.unpack_from,
    "_i32": _INT32.unpack_from,
}


# -- generating the walk ------------------------------------------------------------------


class _Emitter:
    """Python source for one (schema, version, flexible) walk: ``pos`` is where the
    next field starts, ``end`` the body's length, ``n`` the last length read."""

    def __init__(self, version: int, flexible: bool) -> None:
        self.version = version
        self.flexible = flexible
        self.lines = ["def _walk(data, end):", "    pos = 0"]

    def emit(self, depth: int, line: str) -> None:
        self.lines.append("    " * depth + line)

    def struct(self, schema: StructField, depth: int) -> None:
        for field in schema.untagged_fields(self.version):
            self.field(field, depth)
        if self.flexible:  # mostly none: a single zero byte
            self.emit(depth, "if pos < end and data[pos] == 0:")
            self.emit(depth + 1, "pos += 1")
            self.emit(depth, "else:")
            self.emit(depth + 1, "pos = _tagged(data, pos, end)")

    def field(self, field: Any, depth: int) -> None:
        if isinstance(field, ArrayField):
            self.length(depth, wide=True)
            self.emit(depth, "if n < 0:")
            self.refuse_null(field, depth + 1)
            self.emit(depth, "else:")
            self.emit(depth + 1, "if n > end - pos:")
            self.emit(depth + 2, f"raise _elements_past({field.name!r}, n, end - pos)")
            self.emit(depth + 1, f"for _ in range(n):  # {field.name}")
            self.element(field.array_of, depth + 2)
            return
        if isinstance(field, StructField):
            if field.nullable_for_version_q(self.version):
                self.fixed(1, depth)
                self.emit(depth, "if data[pos - 1] != 0xFF:")
                self.struct(field, depth + 1)
                self.emit(depth + 1, "pass")
                return
            self.struct(field, depth)
            return
        self.element(field, depth)

    def element(self, element: Any, depth: int) -> None:
        if isinstance(element, StructField):
            self.struct(element, depth)
            self.emit(depth, "pass")
            return
        assert isinstance(element, SimpleField), element
        kind = element.type_str
        fixed = _FIXED_SIZES.get(kind)
        if fixed is not None:
            self.fixed(fixed, depth)
            return
        self.length(depth, wide=kind != "string")
        self.emit(depth, "if n < 0:")
        self.refuse_null(element, depth + 1)
        self.emit(depth, "else:")
        self.emit(depth + 1, "if pos + n > end:")
        self.emit(depth + 2, "raise _past(n, pos, end)")
        self.emit(depth + 1, "pos += n")

    def fixed(self, size: int, depth: int) -> None:
        self.emit(depth, f"if pos + {size} > end:")
        self.emit(depth + 1, f"raise _past({size}, pos, end)")
        self.emit(depth, f"pos += {size}")

    def length(self, depth: int, wide: bool) -> None:
        """A length or count: compact (unsigned varint, plus one) in flexible versions,
        else int32 (arrays, bytes) or int16 (strings)."""
        if self.flexible:  # mostly a one-byte varint
            self.emit(depth, "if pos < end and data[pos] < 0x80:")
            self.emit(depth + 1, "n = data[pos] - 1")
            self.emit(depth + 1, "pos += 1")
            self.emit(depth, "else:")
            self.emit(depth + 1, "n, pos = _uvarint(data, pos, end)")
            self.emit(depth + 1, "n -= 1")
            return
        size, unpack = (4, "_i32") if wide else (2, "_i16")
        self.fixed(size, depth)
        self.emit(depth, f"(n,) = {unpack}(data, pos - {size})")

    def refuse_null(self, field: Any, depth: int) -> None:
        if field.nullable_for_version_q(self.version):
            self.emit(depth, "if n != -1:")
            self.emit(depth + 1, f"raise _null({field.name!r}, n)")
        else:
            self.emit(depth, f"raise _null({field.name!r}, n)")


def _compile(schema: StructField, version: int, flexible: bool) -> Walk:
    emitter = _Emitter(version, flexible)
    emitter.struct(schema, 1)
    emitter.emit(1, "return pos")
    namespace = dict(_HELPERS)
    source = "\n".join(emitter.lines)
    exec(compile(source, f"<length_audit:{schema.name}_v{version}>", "exec"), namespace)
    return namespace["_walk"]  # type: ignore[no-any-return]
