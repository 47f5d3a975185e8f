"""The compiled record walker accepts exactly the bytes the Python decoder accepts, and
names the first record at fault."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from epochlog.protocol import record_walk
from epochlog.protocol.errors import KafkaError
from epochlog.protocol.records import _decode, encode_varint


def _sized(data: bytes | None) -> bytes:
    return encode_varint(-1) if data is None else encode_varint(len(data)) + data


def _record(
    offset_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: list[tuple[bytes, bytes | None]],
    timestamp_delta: int,
) -> bytes:
    body = b"\x00" + encode_varint(timestamp_delta) + encode_varint(offset_delta)
    body += _sized(key) + _sized(value) + encode_varint(len(headers))
    for name, header_value in headers:
        body += _sized(name) + _sized(header_value)
    return encode_varint(len(body)) + body


def _python_verdict(data: bytes, count: int, require_keys: bool) -> bool:
    try:
        records = list(_decode(data, 0, len(data), count, 0, 0, None))
    except KafkaError:
        return False
    if [r.offset for r in records] != list(range(count)):
        return False
    return not (require_keys and any(r.key is None for r in records))


def _walk(data: bytes, count: int, require_keys: bool) -> tuple[int, int]:
    return record_walk.walk(np.frombuffer(data, dtype=np.uint8), 0, len(data), count, require_keys)


# Header names include bytes that are not UTF-8 (a lone continuation byte, an overlong
# form, a surrogate, a code point past U+10FFFF, a cut sequence) next to valid ones.
_NAMES = st.one_of(
    st.text(max_size=6).map(str.encode),
    st.sampled_from([b"\x80", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe2\x82"]),
    st.binary(max_size=4),
)
_RECORDS = st.lists(
    st.tuples(
        st.one_of(st.none(), st.binary(max_size=80)),
        st.one_of(st.none(), st.binary(max_size=300)),
        st.lists(st.tuples(_NAMES, st.one_of(st.none(), st.binary(max_size=20))), max_size=3),
        st.integers(-(2**40), 2**40),
    ),
    min_size=1,
    max_size=20,
)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=_RECORDS,
    flips=st.lists(st.tuples(st.integers(0, 10_000), st.integers(1, 255)), max_size=3),
    cut=st.integers(-2, 3),
    wrong_delta=st.booleans(),
    require_keys=st.booleans(),
)
def test_walker_accepts_exactly_what_the_decoder_accepts(
    records: list[tuple[bytes | None, bytes | None, list, int]],
    flips: list[tuple[int, int]],
    cut: int,
    wrong_delta: bool,
    require_keys: bool,
) -> None:
    deltas = list(range(len(records)))
    if wrong_delta:
        deltas[-1] += 1
    data = bytearray(
        b"".join(
            _record(delta, key, value, headers, ts)
            for delta, (key, value, headers, ts) in zip(deltas, records, strict=True)
        )
    )
    for at, mask in flips:
        data[at % len(data)] ^= mask
    # A negative cut leaves stray bytes after the last record.
    raw = bytes(data[: len(data) - cut]) if cut >= 0 else bytes(data) + b"\x00" * -cut
    fault, _ = _walk(raw, len(records), require_keys)
    assert (fault == record_walk.OK) == _python_verdict(raw, len(records), require_keys)


def test_walker_names_the_kind_of_fault_and_the_record() -> None:
    good = [_record(i, b"k", b"v%d" % i, [(b"h", None)], 5) for i in range(6)]
    assert _walk(b"".join(good), 6, True) == (record_walk.OK, 6)
    wrong = good[:3] + [_record(7, b"k", b"v", [], 0)] + good[4:]
    assert _walk(b"".join(wrong), 6, False) == (record_walk.WRONG_OFFSET_DELTA, 3)
    keyless = good[:4] + [_record(4, None, b"v", [], 0)] + good[5:]
    assert _walk(b"".join(keyless), 6, False) == (record_walk.OK, 6)
    assert _walk(b"".join(keyless), 6, True) == (record_walk.MISSING_KEY, 4)
    bad_name = good[:2] + [_record(2, b"k", b"v", [(b"\xff", b"x")], 0)] + good[3:]
    assert _walk(b"".join(bad_name), 6, False) == (record_walk.BAD_RECORD, 2)
    assert _walk(b"".join(good) + b"\x00", 6, False) == (record_walk.TRAILING_BYTES, 6)
    assert _walk(b"".join(good)[:-1], 6, False) == (record_walk.BAD_RECORD, 5)


def _reference_varint(data: bytes, max_bytes: int) -> tuple[int, int]:
    """Java's reading: 7 bits a byte, bits past the 64th dropped, zig-zag decoded."""
    raw = 0
    for i, byte in enumerate(data[:max_bytes]):
        raw |= (byte & 0x7F) << (7 * i)
        if byte < 0x80:
            raw &= (1 << 64) - 1
            return (raw >> 1) ^ -(raw & 1), i + 1
    return 0, -1


@given(
    value=st.one_of(
        st.integers(-(2**63), 2**63 - 1),
        st.sampled_from([0, -1, 1, 63, -64, 64, 2**31 - 1, -(2**31), 2**63 - 1, -(2**63)]),
    )
)
@settings(max_examples=400, deadline=None)
def test_varints_decode_over_the_whole_64_bit_range(value: int) -> None:
    data = encode_varint(value)
    buf = np.frombuffer(data, dtype=np.uint8)
    assert record_walk._varint(buf, 0, len(data), 10) == (value, len(data))


@given(data=st.binary(min_size=1, max_size=12), max_bytes=st.sampled_from([5, 10]))
@settings(max_examples=600, deadline=None)
def test_any_bytes_decode_as_javas_varint_reader_does(data: bytes, max_bytes: int) -> None:
    """Over-long encodings, a tenth byte with bits past the 64th, running out: the same
    value (or refusal) as the reference."""
    buf = np.frombuffer(data, dtype=np.uint8)
    assert record_walk._varint(buf, 0, len(data), max_bytes) == _reference_varint(data, max_bytes)
