"""Record codec (magic 2): round trips, kafka-python as an oracle, produce validation,
LogAppendTime, and malformed input that must only ever raise KafkaError."""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Iterator

import cramjam
import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record import default_records as kp
from kafka.record.util import encode_varint as kp_encode_varint

from epochlog.protocol import batch as b
from epochlog.protocol.errors import ErrorCode, KafkaError
from epochlog.protocol.records import (
    Record,
    build_batch,
    decode_varint,
    encode_varint,
    iter_records,
    validate_records,
    varint_size,
)

CODECS = [0, 1, 2, 3, 4]
T0 = 1_767_225_600_000

SAMPLE = [
    (b"key-0", b"value-0", [], T0),
    (None, b"null key", [("h", b"v")], T0 + 5),
    (b"null value", None, [("h1", None), ("h2", b""), ("\u00e9t\u00e9", b"x" * 200)], T0 - 3),
    (None, None, [], T0 + 1_000_000),
    (b"", b"", [("", b"")], T0 + 2),
    (b"k" * 300, bytes(range(256)) * 4, [("big", b"y" * 1000)], T0 + 2),
]


def _tuples(records: list[Record]) -> list[tuple]:
    return [(r.key, r.value, r.headers, r.timestamp) for r in records]


# --- varints -----------------------------------------------------------------------

EDGES = [0, 1, -1, 63, -64, 64, -65, 127, 128, 2**31 - 1, -(2**31), 2**63 - 1, -(2**63)]


@pytest.mark.parametrize("value", EDGES)
def test_varint_matches_kafka_python(value: int) -> None:
    theirs = bytearray()
    kp_encode_varint(value, theirs.append)
    ours = encode_varint(value)
    assert ours == bytes(theirs)
    assert varint_size(value) == len(ours)
    assert decode_varint(ours + b"tail", long=True) == (value, len(ours))


def test_varint_errors() -> None:
    with pytest.raises(KafkaError):
        decode_varint(b"\x80\x80")
    with pytest.raises(KafkaError):  # six bytes is too long for a varint
        decode_varint(b"\x80\x80\x80\x80\x80\x01")
    assert decode_varint(b"\x80\x80\x80\x80\x80\x01", long=True)[1] == 6


# --- round trips -------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip(codec: int) -> None:
    buf = build_batch(SAMPLE, base_offset=1000, compression=codec)
    header = b.validate_batch(buf)
    assert header.compression == codec
    assert header.records_count == len(SAMPLE)
    assert header.last_offset_delta == len(SAMPLE) - 1
    assert header.base_timestamp == T0
    assert header.max_timestamp == T0 + 1_000_000
    records = list(iter_records(buf))
    assert [r.offset for r in records] == list(range(1000, 1000 + len(SAMPLE)))
    assert _tuples(records) == SAMPLE
    validate_records(buf)


def test_round_trip_accepts_record_objects_and_buffer_types() -> None:
    records = list(iter_records(build_batch(SAMPLE)))
    again = build_batch(records, base_offset=7)
    for form in (again, bytearray(again), memoryview(again)):
        assert _tuples(list(iter_records(form))) == SAMPLE


def test_producer_fields() -> None:
    buf = build_batch(
        SAMPLE[:2],
        producer_id=42,
        producer_epoch=3,
        base_sequence=17,
        partition_leader_epoch=9,
        is_transactional=True,
    )
    header = b.validate_batch(buf)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (42, 3, 17)
    assert header.partition_leader_epoch == 9
    assert header.is_transactional
    assert header.last_sequence == 18


def test_none_timestamp_means_the_callers_now() -> None:
    (rec,) = iter_records(build_batch([(b"k", b"v", [], None)], now_ms=1_234))
    assert rec.timestamp == 1_234
    with pytest.raises(ValueError, match="now_ms"):
        build_batch([(b"k", b"v", [], None)])


def test_patched_batch_reports_patched_offset() -> None:
    buf = bytearray(build_batch(SAMPLE))
    patched = b.patch_offset_and_epoch(buf, 0, b.read_header(buf), 5000, 4)
    assert [r.offset for r in iter_records(buf)] == list(range(5000, 5000 + len(SAMPLE)))
    # The header handed back is the one now in the bytes (the log indexes by it).
    assert patched == b.read_header(buf)
    assert (patched.base_offset, patched.partition_leader_epoch) == (5000, 4)
    assert type(patched) is b.BatchHeader


def test_empty_build_is_refused() -> None:
    with pytest.raises(ValueError):
        build_batch([])


# --- LogAppendTime -----------------------------------------------------------------


def test_log_append_time_built() -> None:
    buf = build_batch(SAMPLE, timestamp_type_log_append=True)
    assert b.read_header(buf).is_log_append_time
    assert {r.timestamp for r in iter_records(buf)} == {T0 + 1_000_000}


def test_log_append_time_patched_by_broker() -> None:
    buf = bytearray(build_batch(SAMPLE, compression=1))
    b.patch_log_append_time(buf, 0, T0 + 777)
    assert {r.timestamp for r in iter_records(buf)} == {T0 + 777}
    theirs = list(kp.DefaultRecordBatch(bytearray(buf)))
    assert {r.timestamp for r in theirs} == {T0 + 777}


# --- kafka-python as an oracle -----------------------------------------------------


class _RawSnappy:
    """kafka-python's xerial framing code over cramjam's raw snappy blocks."""

    compress = staticmethod(lambda d: bytes(cramjam.snappy.compress_raw(d)))
    decompress = staticmethod(lambda d: bytes(cramjam.snappy.decompress_raw(d)))


@pytest.fixture
def kafka_python_codecs(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """kafka-python checks and calls python-snappy, lz4 and zstandard. Where those are
    installed they are an independent oracle; where not, cramjam stands in for the raw
    codec so kafka-python's batch layout and snappy framing are still checked."""
    codec = kp.codecs
    if codec.snappy is None:
        monkeypatch.setattr(codec, "snappy", _RawSnappy)
    if not codec.has_lz4():
        monkeypatch.setattr(codec, "lz4", True)
        monkeypatch.setattr(kp, "lz4_encode", lambda d: bytes(cramjam.lz4.compress(d)))
        monkeypatch.setattr(kp, "lz4_decode", lambda d: bytes(cramjam.lz4.decompress(d)))
    if codec.zstd is None:
        monkeypatch.setattr(codec, "zstd", True)
        monkeypatch.setattr(kp, "zstd_encode", lambda d: bytes(cramjam.zstd.compress(d)))
        monkeypatch.setattr(kp, "zstd_decode", lambda d: bytes(cramjam.zstd.decompress(d)))
    yield


def _kp_build(records: list[tuple], codec: int) -> bytearray:
    builder = kp.DefaultRecordBatchBuilder(2, codec, False, -1, -1, -1, 1 << 30)
    for i, (key, value, headers, ts) in enumerate(records):
        assert builder.append(i, ts, key, value, headers) is not None
    return builder.build()


# Compressible enough that kafka-python keeps the codec (it falls back to none).
ORACLE = SAMPLE * 20


@pytest.mark.usefixtures("kafka_python_codecs")
@pytest.mark.parametrize("codec", CODECS)
def test_decodes_what_kafka_python_builds(codec: int) -> None:
    buf = _kp_build(ORACLE, codec)
    assert b.read_header(buf).compression == codec
    b.patch_offset_and_epoch(buf, 0, b.read_header(buf), 300, 2)
    records = list(iter_records(bytes(buf)))
    assert [r.offset for r in records] == list(range(300, 300 + len(ORACLE)))
    assert _tuples(records) == ORACLE
    validate_records(buf)


@pytest.mark.usefixtures("kafka_python_codecs")
@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_decodes_what_we_build(codec: int) -> None:
    buf = build_batch(ORACLE, base_offset=50, compression=codec, partition_leader_epoch=3)
    batch = kp.DefaultRecordBatch(bytearray(buf))
    assert batch.validate_crc()
    assert batch.compression_type == codec
    assert (batch.base_offset, batch.leader_epoch, batch.records_count) == (50, 3, len(ORACLE))
    theirs = [(r.offset, r.key, r.value, r.headers, r.timestamp) for r in batch]
    expected = [(50 + i, k, v, h, ts) for i, (k, v, h, ts) in enumerate(ORACLE)]
    assert theirs == expected


def test_uncompressed_bytes_match_kafka_python_exactly() -> None:
    ours = build_batch(ORACLE, partition_leader_epoch=0)
    assert ours == bytes(_kp_build(ORACLE, 0))


# --- produce validation ------------------------------------------------------------


def _raw_record(offset_delta: int, ts_delta: int = 0, body_extra: bytes = b"") -> bytes:
    body = b"\x00" + encode_varint(ts_delta) + encode_varint(offset_delta)
    body += encode_varint(1) + b"k" + encode_varint(1) + b"v" + b"\x00" + body_extra
    return encode_varint(len(body) - len(body_extra)) + body


def _assemble(records: bytes, count: int, last_offset_delta: int, codec: int = 0) -> bytes:
    """A batch with a correct CRC around hand-made records, for rule violations."""
    from epochlog.protocol.compression import compress

    payload = compress(codec, records)
    out = bytearray(b.HEADER_SIZE) + payload
    struct.pack_into(
        ">qiibIhiqqqhii", out, 0, 0, len(out) - b.LOG_OVERHEAD, -1, 2, 0, codec,
        last_offset_delta, T0, T0, -1, -1, -1, count,
    )  # fmt: skip
    struct.pack_into(">I", out, b.CRC, crc32c.crc32c(memoryview(out)[b.ATTRIBUTES :]))
    return bytes(out)


def test_hand_assembled_batch_is_valid() -> None:
    buf = _assemble(b"".join(_raw_record(i) for i in range(3)), 3, 2)
    validate_records(buf)
    assert [(r.offset, r.key, r.value) for r in iter_records(buf)] == [
        (i, b"k", b"v") for i in range(3)
    ]


@pytest.mark.parametrize("codec", [0, 1])
@pytest.mark.parametrize(
    ("records", "count", "last_delta"),
    [
        pytest.param([0, 2, 1], 3, 2, id="out-of-order"),
        pytest.param([0, 1, 3], 3, 2, id="gap"),
        pytest.param([1, 2, 3], 3, 2, id="not-from-zero"),
        pytest.param([0, 1, 2], 3, 3, id="last-delta-too-big"),
        pytest.param([0, 1, 2], 3, 1, id="last-delta-too-small"),
        pytest.param([0, 1, 2], 2, 1, id="more-records-than-count"),
        pytest.param([0, 1], 3, 2, id="fewer-records-than-count"),
        pytest.param([], 0, 0, id="empty"),
    ],
)
def test_produce_rules(codec: int, records: list[int], count: int, last_delta: int) -> None:
    buf = _assemble(b"".join(_raw_record(d) for d in records), count, last_delta, codec)
    with pytest.raises(KafkaError) as info:
        validate_records(buf)
    assert info.value.code == ErrorCode.INVALID_RECORD


def _framed(body: bytes) -> bytes:
    return encode_varint(len(body)) + body


# attributes, timestamp delta 0, offset delta 1, then the fields under test
_HEAD = b"\x00\x00\x02"


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        pytest.param(_raw_record(1, body_extra=b"\x00"), "after the batch", id="length-short"),
        pytest.param(b"\x20" + _raw_record(1)[1:], "record length", id="length-past-end"),
        pytest.param(_framed(_HEAD + b"\x03xx\x02v\x00"), "key length -2", id="key-minus-2"),
        pytest.param(_framed(_HEAD + b"\x02k\x05\x00"), "value length -3", id="value-minus-3"),
        pytest.param(_framed(_HEAD + b"\x02k\x02v\x01"), "header count -1", id="headers-minus-1"),
        pytest.param(_framed(_HEAD + b"\x02k\x02v\x02\x02\xff\x01"), "malformed", id="not-utf8"),
        pytest.param(_framed(_HEAD + b"\x02k\x02v\x02\x01\x01"), "header key", id="null-hkey"),
        pytest.param(_framed(_HEAD + b"\x02k\x02v\x00\x00"), "fields take", id="record-slack"),
        pytest.param(_framed(_HEAD + b"\x02k\x80"), "malformed", id="cut-varint"),
    ],
)
def test_record_structure_errors(bad: bytes, message: str) -> None:
    buf = _assemble(_raw_record(0) + bad, 2, 1)
    with pytest.raises(KafkaError, match=message) as info:
        list(iter_records(buf))
    assert info.value.code == ErrorCode.INVALID_RECORD


def test_corrupt_crc_and_compression() -> None:
    buf = bytearray(build_batch(SAMPLE, compression=4))
    buf[-1] ^= 0xFF
    with pytest.raises(KafkaError) as info:
        iter_records(buf)
    assert info.value.code == ErrorCode.CORRUPT_MESSAGE
    with pytest.raises(KafkaError) as info:  # past the CRC, the codec notices
        list(iter_records(buf, check_crc=False))
    assert info.value.code == ErrorCode.CORRUPT_MESSAGE


def test_unknown_codec_in_attributes() -> None:
    buf = bytearray(build_batch(SAMPLE))
    buf[b.ATTRIBUTES + 1] |= 0x07
    with pytest.raises(KafkaError) as info:
        iter_records(buf, check_crc=False)
    assert info.value.code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


# --- malformed input only ever raises KafkaError ----------------------------------

header_pairs = st.lists(
    st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=8)), max_size=3
)
record_tuples = st.lists(
    st.tuples(
        st.none() | st.binary(max_size=20),
        st.none() | st.binary(max_size=40),
        header_pairs,
        st.integers(-(2**40), 2**41),
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=200, deadline=None)
@given(records=record_tuples, codec=st.sampled_from(CODECS), base=st.integers(0, 2**40))
def test_property_round_trip(records: list[tuple], codec: int, base: int) -> None:
    buf = build_batch(records, base_offset=base, compression=codec)
    validate_records(buf)
    decoded = list(iter_records(buf))
    assert [r.offset for r in decoded] == list(range(base, base + len(records)))
    assert _tuples(decoded) == [(k, v, list(h), ts) for k, v, h, ts in records]


def _recrc(buf: bytearray) -> None:
    end = min(len(buf), b.read_header(buf).size) if len(buf) >= b.HEADER_SIZE else len(buf)
    if end > b.ATTRIBUTES:
        struct.pack_into(">I", buf, b.CRC, crc32c.crc32c(memoryview(buf)[b.ATTRIBUTES : end]))


def _decode_all(buf: bytes | bytearray) -> None:
    for check_crc in (True, False):
        with contextlib.suppress(KafkaError):
            list(iter_records(buf, check_crc=check_crc))
        with contextlib.suppress(KafkaError):
            validate_records(buf)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=record_tuples,
    codec=st.sampled_from(CODECS),
    data=st.data(),
    fix_crc=st.booleans(),
)
def test_mutated_batches_only_raise_kafka_error(
    records: list[tuple], codec: int, data: st.DataObject, fix_crc: bool
) -> None:
    buf = bytearray(build_batch(records, compression=codec))
    # Mutate mostly past the header, where the record decoder does its work.
    for _ in range(data.draw(st.integers(1, 6))):
        where = data.draw(st.integers(0, len(buf) - 1) | st.integers(b.HEADER_SIZE, len(buf) - 1))
        buf[where] = data.draw(st.integers(0, 255))
    cut = data.draw(st.none() | st.integers(0, len(buf)))
    if cut is not None:
        del buf[cut:]
    if fix_crc:
        with contextlib.suppress(KafkaError):
            _recrc(buf)
    _decode_all(buf)


@settings(max_examples=300, deadline=None)
@given(tail=st.binary(max_size=120), count=st.integers(-3, 2**31 - 1), codec=st.integers(0, 7))
def test_random_records_section_only_raises_kafka_error(
    tail: bytes, count: int, codec: int
) -> None:
    out = bytearray(b.HEADER_SIZE) + tail
    struct.pack_into(
        ">qiibIhiqqqhii", out, 0, 0, len(out) - b.LOG_OVERHEAD, -1, 2, 0, codec,
        max(count - 1, 0), T0, T0, -1, -1, -1, count,
    )  # fmt: skip
    _recrc(out)
    _decode_all(out)


@settings(max_examples=200, deadline=None)
@given(junk=st.binary(max_size=120))
def test_random_bytes_only_raise_kafka_error(junk: bytes) -> None:
    _decode_all(junk)
