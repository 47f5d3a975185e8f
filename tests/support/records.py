"""Deterministic records and the comparison every interop and crash test shares.

Each record carries its index in key, value and a header, and an explicit timestamp
derived from the index, so any loss, duplicate, reorder or corruption shows up as a
precise mismatch instead of a count that is merely off.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from epochlog.protocol.records import iter_records

# 2026-01-01T00:00:00Z; far from "now" so a broker stamping its own time is caught.
BASE_TIMESTAMP_MS = 1_767_225_600_000
# Records are spaced so a timestamp between two records has an unambiguous answer.
TIMESTAMP_STEP_MS = 3
_PAD = (b"epochlog-interop-" * 8)[:100]

Headers = list[tuple[str, bytes]]


@dataclass(frozen=True, slots=True)
class Rec:
    key: bytes | None
    value: bytes | None
    headers: Headers = field(default_factory=list)
    timestamp: int = -1


@dataclass(frozen=True, slots=True)
class Got:
    """A consumed record as the client handed it back."""

    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp: int


def timestamp_of(index: int) -> int:
    return BASE_TIMESTAMP_MS + index * TIMESTAMP_STEP_MS


def make_records(n: int, tag: str) -> list[Rec]:
    """n varied records: lengths vary, some have no headers, some an empty value."""
    recs = []
    tag_b = tag.encode()
    for i in range(n):
        value = b"%s-%07d-" % (tag_b, i) + _PAD[: (i * 7) % 91]
        if i % 5000 == 1:
            value = b""
        headers: Headers = [("seq", b"%d" % i), ("tag", tag_b)]
        if i % 1000 == 7:
            headers = []
        elif i % 1000 == 9:
            headers = [("seq", b"%d" % i), ("dup", b"a"), ("dup", b"b")]
        recs.append(Rec(b"k%07d" % i, value, headers, timestamp_of(i)))
    return recs


def index_of(key: bytes | None) -> int:
    """Recover a record's index from its key (crash tests rely on it)."""
    assert key is not None and key.startswith(b"k"), f"not a test record key: {key!r}"
    return int(key[1:])


def assert_same_records(
    expected: Sequence[Rec],
    got: Sequence[Got],
    base_offset: int = 0,
    check_timestamps: bool = True,
) -> None:
    """Every record back, in order, at consecutive offsets; first difference named."""
    for i, (want, have) in enumerate(zip(expected, got, strict=False)):
        where = f"record {i} (offset {have.offset})"
        assert have.offset == base_offset + i, (
            f"{where}: expected offset {base_offset + i}: offsets are not consecutive"
        )
        assert have.key == want.key, f"{where}: key {have.key!r} != {want.key!r}"
        assert (have.value or b"") == (want.value or b""), (
            f"{where}: value {have.value!r} != {want.value!r}"
        )
        assert list(have.headers) == list(want.headers), (
            f"{where}: headers {have.headers!r} != {want.headers!r}"
        )
        if check_timestamps:
            assert have.timestamp == want.timestamp, (
                f"{where}: timestamp {have.timestamp} != {want.timestamp}"
            )
    assert len(got) == len(expected), f"consumed {len(got)} records, produced {len(expected)}"


def expected_offset_for_time(timestamps: Sequence[int], target: int) -> int | None:
    """Kafka's answer: the first offset whose timestamp is >= target, None past the end."""
    for offset, ts in enumerate(timestamps):
        if ts >= target:
            return offset
    return None


def timestamp_probes(timestamps: Sequence[int]) -> list[int]:
    """Targets that exercise ListOffsets: before, exactly on, between and after records."""
    n = len(timestamps)
    picks = sorted({0, 1, n // 3, n // 2, n - 2, n - 1})
    targets = [timestamps[0] - 1000]
    for i in picks:
        targets += [timestamps[i], timestamps[i] + 1]
    targets.append(timestamps[-1] + 1000)
    return targets


def interop_record_count() -> int:
    """100,000 per client and codec, as the issue pins; EPOCHLOG_INTEROP_RECORDS lowers it
    for local iteration only (`EPOCHLOG_INTEROP_RECORDS=2000 bash scripts/test.sh`)."""
    return int(os.environ.get("EPOCHLOG_INTEROP_RECORDS", "100000"))


# Records for the ListOffsets-by-timestamp checks.
TIMESTAMP_RECORDS = 5000


def values_of(data: bytes | None) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every record of whole record batches (a Fetch answer's)."""
    out = []
    pos = 0
    data = data or b""
    while pos < len(data):
        size = int.from_bytes(data[pos + 8 : pos + 12], "big") + 12
        out += [(r.offset, r.value) for r in iter_records(data[pos : pos + size])]
        pos += size
    return out
