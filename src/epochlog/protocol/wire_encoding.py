"""The pieces of Kafka's wire format that the hand-encoded responses share
(``fetch_response``, ``produce_response``): unsigned varints, strings and array lengths,
in the classic form and the flexible versions' compact one."""

from __future__ import annotations

import struct

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def uvarint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def string(value: str | None, flexible: bool) -> bytes:
    """A (nullable) string: INT16 length or, flexible, unsigned varint length + 1."""
    if value is None:
        return b"\x00" if flexible else b"\xff\xff"
    data = value.encode()
    return (uvarint(len(data) + 1) if flexible else _I16.pack(len(data))) + data


def array_len(count: int, flexible: bool) -> bytes:
    return uvarint(count + 1) if flexible else _I32.pack(count)
