"""The compiled length audit against request bodies written from the same schemas: every
valid body of every version the broker serves walks to its end (and kafka.protocol
decodes it to the same end), every body cut short is refused as running past the frame,
a length Kafka forbids is refused by name, and damaged bytes raise LengthError or walk
to an end inside the body, never anything else."""

from __future__ import annotations

import random
import struct
from typing import Any

import pytest
from kafka.protocol.schemas.fields import ArrayField, StructField

from epochlog.broker.handlers import SUPPORTED
from epochlog.protocol.apis import ApiSpec, decode_request_body
from epochlog.protocol.length_audit import LengthError, audit

_FIXED = {"int8": 1, "bool": 1, "int16": 2, "int32": 4, "int64": 8, "float64": 8, "uuid": 16}


class _Writer:
    """Random valid bytes for one schema version: short strings, small arrays, some
    nulls where allowed, now and then a tagged field the schema does not know."""

    def __init__(self, rng: random.Random, version: int, flexible: bool) -> None:
        self.rng, self.version, self.flexible = rng, version, flexible
        self.out = bytearray()

    def struct(self, schema: StructField) -> None:
        for field in schema.untagged_fields(self.version):
            self.field(field)
        if self.flexible:
            if self.rng.random() < 0.2:
                self.out += bytes([1, 99, 2]) + b"\x00\x01"  # one unknown tag, 2 bytes
            else:
                self.out += b"\x00"

    def field(self, field: Any) -> None:
        if isinstance(field, ArrayField):
            if field.nullable_for_version_q(self.version) and self.rng.random() < 0.2:
                self.length(-1, wide=True)
                return
            count = self.rng.randint(0, 2)
            self.length(count, wide=True)
            for _ in range(count):
                self.element(field.array_of)
            return
        if isinstance(field, StructField) and field.nullable_for_version_q(self.version):
            if self.rng.random() < 0.3:
                self.out += b"\xff"
                return
            self.out += b"\x01"
        self.element(field)

    def element(self, element: Any) -> None:
        if isinstance(element, StructField):
            self.struct(element)
            return
        kind = element.type_str
        if kind in _FIXED:
            self.out += bytes(_FIXED[kind])
            return
        wide = kind != "string"
        if element.nullable_for_version_q(self.version) and self.rng.random() < 0.2:
            self.length(-1, wide)
            return
        size = self.rng.randint(0, 5)
        self.length(size, wide)
        self.out += b"a" * size

    def length(self, value: int, wide: bool) -> None:
        if self.flexible:
            self.out += bytes([value + 1])  # under 127: one varint byte
        else:
            self.out += struct.pack(">i" if wide else ">h", value)


def _bodies(spec: ApiSpec, version: int, count: int) -> list[bytes]:
    rng = random.Random(f"{spec.key}-{version}")
    bodies = []
    for _ in range(count):
        writer = _Writer(rng, version, spec.is_flexible(version))
        writer.struct(spec.request._struct)
        bodies.append(bytes(writer.out))
    return bodies


SERVED = [
    pytest.param(spec, version, id=f"{spec.name}-v{version}")
    for spec in SUPPORTED.values()
    for version in range(spec.min_version, spec.max_version + 1)
]


@pytest.mark.parametrize(("spec", "version"), SERVED)
def test_every_served_request_version_walks_to_its_end_and_refuses_any_cut(
    spec: ApiSpec, version: int
) -> None:
    flexible = spec.is_flexible(version)
    schema = spec.request._struct
    for body in _bodies(spec, version, 8):
        view = memoryview(body)
        assert audit(schema, version, flexible, view) == len(body)
        decode_request_body(spec, version, view)  # kafka.protocol reads it to its end too
        for cut in range(len(body)):
            with pytest.raises(LengthError, match="past the frame"):
                audit(schema, version, flexible, view[:cut])


@pytest.mark.parametrize(("spec", "version"), SERVED)
def test_damaged_bytes_raise_length_error_or_walk_to_an_end_within_the_body(
    spec: ApiSpec, version: int
) -> None:
    flexible = spec.is_flexible(version)
    schema = spec.request._struct
    rng = random.Random(f"damage-{spec.key}-{version}")
    for body in _bodies(spec, version, 4):
        for _ in range(40):
            damaged = bytearray(body)
            for _ in range(rng.randint(1, 3)):
                if damaged:
                    damaged[rng.randrange(len(damaged))] = rng.randrange(256)
            try:
                end = audit(schema, version, flexible, memoryview(bytes(damaged)))
            except LengthError:
                continue
            assert 0 <= end <= len(damaged)


def test_negative_lengths_are_refused_by_name_unless_null_is_allowed() -> None:
    spec = SUPPORTED[0]  # Produce
    schema = spec.request._struct
    # v3 (not flexible): transactional_id (nullable string), acks, timeout, topic_data.
    head = struct.pack(">h", -1) + struct.pack(">hi", -1, 30000)
    assert audit(schema, 3, False, memoryview(head + struct.pack(">i", 0))) == len(head) + 4
    with pytest.raises(LengthError, match="topic_data: length -1 where Kafka allows none"):
        audit(schema, 3, False, memoryview(head + struct.pack(">i", -1)))
    with pytest.raises(LengthError, match="transactional_id: length -2 where"):
        audit(schema, 3, False, memoryview(struct.pack(">h", -2) + head[2:]))
    with pytest.raises(LengthError, match="topic_data: 1000 elements run past the frame"):
        audit(schema, 3, False, memoryview(head + struct.pack(">i", 1000)))
    # v9 (flexible): a varint that never ends.
    with pytest.raises(LengthError, match="varint longer than 5 bytes"):
        audit(schema, 9, True, memoryview(b"\xff" * 8))
