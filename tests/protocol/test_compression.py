"""Codecs by Kafka attribute id, xerial snappy framing, and errors on bad data."""

from __future__ import annotations

import gzip
import struct

import cramjam
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from epochlog.protocol import compression
from epochlog.protocol.compression import XERIAL_BLOCK_SIZE, XERIAL_MAGIC, compress, decompress
from epochlog.protocol.errors import ErrorCode, KafkaError

CODECS = [0, 1, 2, 3, 4]
COMPRESSED = [1, 2, 3, 4]

SAMPLES = [
    b"",
    b"x",
    b"hello kafka " * 1000,
    bytes(range(256)) * 300,  # crosses several xerial blocks
]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("data", SAMPLES, ids=lambda d: f"{len(d)}B")
def test_round_trip(codec: int, data: bytes) -> None:
    packed = compress(codec, data)
    assert isinstance(packed, bytes)
    assert decompress(codec, packed) == data


@pytest.mark.parametrize("codec", CODECS)
def test_accepts_every_buffer_type(codec: int) -> None:
    data = b"abc" * 100
    packed = compress(codec, bytearray(data))
    assert decompress(codec, memoryview(packed)) == data
    assert decompress(codec, bytearray(packed)) == data


@pytest.mark.parametrize("codec", [5, 6, 7, -1, 99])
def test_unknown_codec(codec: int) -> None:
    for func in (compress, decompress):
        with pytest.raises(KafkaError) as info:
            func(codec, b"data")
        assert info.value.code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


def _xerial(blocks: list[bytes], version: int = 1, compat: int = 1) -> bytes:
    out = XERIAL_MAGIC + struct.pack(">ii", version, compat)
    for block in blocks:
        raw = bytes(cramjam.snappy.compress_raw(block))
        out += struct.pack(">i", len(raw)) + raw
    return out


def test_snappy_writes_xerial_framing() -> None:
    data = b"01234567" * (XERIAL_BLOCK_SIZE // 4)  # two full blocks
    packed = compress(2, data)
    assert packed[:8] == XERIAL_MAGIC
    assert struct.unpack(">ii", packed[8:16]) == (1, 1)
    pos, blocks = 16, []
    while pos < len(packed):
        (length,) = struct.unpack_from(">i", packed, pos)
        blocks.append(bytes(cramjam.snappy.decompress_raw(packed[pos + 4 : pos + 4 + length])))
        pos += 4 + length
    assert [len(b) for b in blocks] == [XERIAL_BLOCK_SIZE, XERIAL_BLOCK_SIZE]
    assert b"".join(blocks) == data


def test_snappy_reads_xerial_framed_buffer() -> None:
    # Block sizes other than ours, and the legacy version numbers, must decode too.
    framed = _xerial([b"first block ", b"", b"second" * 5000], version=1, compat=1)
    assert decompress(2, framed) == b"first block " + b"second" * 5000
    assert decompress(2, _xerial([b"old"], version=0, compat=0)) == b"old"


def test_snappy_reads_raw_as_librdkafka_sends() -> None:
    data = b"librdkafka sends raw snappy " * 50
    assert decompress(2, bytes(cramjam.snappy.compress_raw(data))) == data


def test_snappy_agrees_with_kafka_python_framing() -> None:
    """kafka-python's own xerial code, run over cramjam's raw snappy, as an oracle."""
    import kafka.codec as kafka_codec

    class RawSnappy:
        compress = staticmethod(lambda d: bytes(cramjam.snappy.compress_raw(d)))
        decompress = staticmethod(lambda d: bytes(cramjam.snappy.decompress_raw(d)))

    saved = kafka_codec.snappy
    kafka_codec.snappy = kafka_codec.snappy or RawSnappy
    try:
        data = bytes(range(256)) * 700
        assert kafka_codec.snappy_decode(compress(2, data)) == data
        assert decompress(2, kafka_codec.snappy_encode(data)) == data
        assert decompress(2, kafka_codec.snappy_encode(data, xerial_compatible=False)) == data
    finally:
        kafka_codec.snappy = saved


def test_gzip_reads_concatenated_members() -> None:
    assert decompress(1, gzip.compress(b"ab") + gzip.compress(b"cd")) == b"abcd"


def test_zstd_reads_streamed_frame_without_content_size() -> None:
    streamer = cramjam.zstd.Compressor()
    streamer.compress(b"streamed " * 1000)
    frame = bytes(streamer.finish())
    assert decompress(4, frame) == b"streamed " * 1000


def test_zstd_uses_kafka_default_level() -> None:
    assert compression.ZSTD_LEVEL == 3


# Text that compresses better the harder a codec tries (numbers, not one repeated word).
_TEXT = b" ".join(b"%d:%d" % (i, i * i % 9973) for i in range(20000))


@pytest.mark.parametrize("codec, fast, slow", [(1, 1, 9), (3, 1, 17), (4, -50, 19)])
def test_a_level_is_honoured_and_round_trips(codec: int, fast: int, slow: int) -> None:
    quick, thorough = compress(codec, _TEXT, fast), compress(codec, _TEXT, slow)
    assert len(thorough) < len(quick)
    assert decompress(codec, quick) == decompress(codec, thorough) == _TEXT


def test_gzip_level_minus_one_is_kafkas_default() -> None:
    assert compress(1, _TEXT, -1) == compress(1, _TEXT) == compress(1, _TEXT, 6)


def test_lz4_frame_has_independent_blocks() -> None:
    packed = compress(3, b"block " * 50000)
    assert packed[:4] == b"\x04\x22\x4d\x18"  # LZ4 frame magic
    flags = packed[4]
    assert flags >> 6 == 1  # frame version 01
    assert flags & 0x20  # blocks independent: Kafka's Java reader decodes them alone
    assert decompress(3, packed) == b"block " * 50000
    big = bytes(range(256)) * 2000  # several 64 KiB blocks
    assert decompress(3, compress(3, big)) == big


GARBAGE = [
    b"",
    b"\x00",
    b"not compressed at all",
    XERIAL_MAGIC + b"\x00\x00\x00\x01" * 2 + b"\x7f\xff",
]


@pytest.mark.parametrize(
    ("codec", "garbage"),
    # A lone zero byte is valid raw snappy (an empty block), so it is not garbage there.
    [(c, g) for c in COMPRESSED for g in GARBAGE if (c, g) != (2, b"\x00")],
)
def test_corrupt_raises_corrupt_message(codec: int, garbage: bytes) -> None:
    with pytest.raises(KafkaError) as info:
        decompress(codec, garbage)
    assert info.value.code == ErrorCode.CORRUPT_MESSAGE


@pytest.mark.parametrize("codec", COMPRESSED)
def test_truncated_raises_corrupt_message(codec: int) -> None:
    packed = compress(codec, bytes(range(256)) * 100)
    for cut in (1, len(packed) // 2, len(packed) - 1):
        try:
            out = decompress(codec, packed[:cut])
        except KafkaError as exc:
            assert exc.code == ErrorCode.CORRUPT_MESSAGE
        else:  # some formats only lose their tail; never garbage of full length
            assert out != bytes(range(256)) * 100


@settings(max_examples=300, deadline=None)
@given(codec=st.sampled_from(COMPRESSED), data=st.binary(max_size=300), flips=st.data())
def test_mutated_compressed_data_only_raises_kafka_error(
    codec: int, data: bytes, flips: st.DataObject
) -> None:
    packed = bytearray(compress(codec, data))
    for _ in range(flips.draw(st.integers(1, 4))):
        i = flips.draw(st.integers(0, len(packed) - 1))
        packed[i] = flips.draw(st.integers(0, 255))
    try:
        decompress(codec, bytes(packed))
    except KafkaError as exc:
        assert exc.code == ErrorCode.CORRUPT_MESSAGE


@settings(max_examples=300, deadline=None)
@given(codec=st.sampled_from(COMPRESSED), data=st.binary(max_size=200))
def test_random_bytes_only_raise_kafka_error(codec: int, data: bytes) -> None:
    try:
        decompress(codec, data)
    except KafkaError as exc:
        assert exc.code == ErrorCode.CORRUPT_MESSAGE
