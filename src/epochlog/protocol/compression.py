"""Record batch compression codecs, by Kafka's attribute ids, on top of ``cramjam``.

Kafka's snappy as the Java client writes it is wrapped in xerial's framing, which
cramjam lacks: the framing is done here around cramjam's raw snappy blocks.
librdkafka sends plain raw snappy, so decompression accepts both.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Callable

import cramjam

from epochlog.protocol.batch import Buffer
from epochlog.protocol.errors import ErrorCode, KafkaError

NONE = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4

CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}

# xerial snappy-java stream: magic, then int32 version and int32 minimum compatible
# version (both 1), then blocks of int32 length + raw snappy block.
XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_HEADER_SIZE = len(_XERIAL_HEADER)
# snappy-java's default block size: compressed blocks are independent, so any size
# decodes, but clients reading with fixed buffers expect this one.
XERIAL_BLOCK_SIZE = 32 * 1024
_INT32 = struct.Struct(">i")

# Kafka's default zstd level (cramjam's own default, 11, is several times slower).
ZSTD_LEVEL = 3
# What Kafka's gzip level -1 (the default) means.
GZIP_LEVEL = 6


def _snappy_xerial_compress(data: Buffer, level: int | None = None) -> bytes:
    view = memoryview(data)
    out = bytearray(_XERIAL_HEADER)
    compress_raw = cramjam.snappy.compress_raw
    pack = _INT32.pack
    for start in range(0, len(view), XERIAL_BLOCK_SIZE):
        block = compress_raw(view[start : start + XERIAL_BLOCK_SIZE])
        out += pack(len(block))
        out += block
    return bytes(out)


def _snappy_decompress(data: Buffer) -> bytes:
    view = memoryview(data)
    decompress_raw = cramjam.snappy.decompress_raw
    if len(view) < _XERIAL_HEADER_SIZE or view[:8] != XERIAL_MAGIC:
        return bytes(decompress_raw(view))
    # The version ints are not checked: snappy-java itself only reads them for show,
    # and every framing version seen in the wild has the same block layout.
    out = bytearray()
    pos = _XERIAL_HEADER_SIZE
    end = len(view)
    unpack_from = _INT32.unpack_from
    while pos < end:
        if end - pos < 4:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "xerial snappy block length cut short")
        (length,) = unpack_from(view, pos)
        pos += 4
        if length < 0 or pos + length > end:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"xerial snappy block length {length}")
        out += decompress_raw(view[pos : pos + length])
        pos += length
    return bytes(out)


def _gzip_compress(data: Buffer, level: int | None = None) -> bytes:
    # -1 is Kafka's (java.util.zip's) "the default level", 6.
    return bytes(cramjam.gzip.compress(data, level=GZIP_LEVEL if level in (None, -1) else level))


def _lz4_compress(data: Buffer, level: int | None = None) -> bytes:
    # LZ4 frame format with independent blocks: Kafka's Java reader decodes each block
    # on its own (cramjam's one-shot compress links them). No content checksum, like
    # Kafka's own writer.
    compressor = cramjam.lz4.Compressor(level=level, content_checksum=False, block_linked=False)
    compressor.compress(data if type(data) is bytes else bytes(data))  # takes bytes only
    return bytes(compressor.finish())


def _zstd_compress(data: Buffer, level: int | None = None) -> bytes:
    return bytes(cramjam.zstd.compress(data, level=ZSTD_LEVEL if level is None else level))


def _uncompressed(data: Buffer, level: int | None = None) -> bytes:
    return bytes(data)


def _plain(func: Callable[[Buffer], object]) -> Callable[[Buffer], bytes]:
    def run(data: Buffer) -> bytes:
        return bytes(func(data))  # type: ignore[call-overload]

    return run


_COMPRESSORS: dict[int, Callable[[Buffer, int | None], bytes]] = {
    NONE: _uncompressed,
    GZIP: _gzip_compress,
    SNAPPY: _snappy_xerial_compress,
    LZ4: _lz4_compress,
    ZSTD: _zstd_compress,
}

_DECOMPRESSORS: dict[int, Callable[[Buffer], bytes]] = {
    NONE: bytes,
    GZIP: _plain(cramjam.gzip.decompress),
    SNAPPY: _snappy_decompress,
    LZ4: _plain(cramjam.lz4.decompress),
    ZSTD: _plain(cramjam.zstd.decompress),
}


def _unsupported(codec: int) -> KafkaError:
    return KafkaError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, f"compression codec {codec}")


def compress(codec: int, data: Buffer, level: int | None = None) -> bytes:
    """Compress a batch's records section as ``codec`` (a batch attribute id) writes it,
    at ``level`` (Kafka's compression.<codec>.level; None: Kafka's default)."""
    func = _COMPRESSORS.get(codec)
    if func is None:
        raise _unsupported(codec)
    return func(data, level)


def decompress(codec: int, data: Buffer) -> bytes:
    """Decompress a batch's records section; bad data raises CORRUPT_MESSAGE, never
    a codec library's own exception, so callers map every failure to one wire error."""
    func = _DECOMPRESSORS.get(codec)
    if func is None:
        raise _unsupported(codec)
    try:
        return func(data)
    except KafkaError:
        raise
    except Exception as exc:  # cramjam raises DecompressionError, and others on odd input
        name = CODEC_NAMES[codec]
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"cannot decompress {name}: {exc}") from exc


# Codecs whose whole stream cramjam writes into a caller's buffer, stopping (with an
# error) when the buffer is full: the bound costs nothing while data fits.
_DECOMPRESS_INTO: dict[int, Callable[[Buffer, Buffer], int]] = {
    GZIP: cramjam.gzip.decompress_into,
    LZ4: cramjam.lz4.decompress_into,
    ZSTD: cramjam.zstd.decompress_into,
}
# What a mapping keeps resident after a large output, before it is given back.
_KEEP_RESIDENT = 4 << 20


class BoundedDecompressor:
    """Decompresses records sections into one reusable anonymous mapping of ``limit``
    bytes, so that no input (a 65 KB gzip bomb of 64 MiB, say) makes more than
    ``limit`` bytes resident: what does not fit is refused as MESSAGE_TOO_LARGE. The
    mapping's untouched pages cost nothing; pages used by a large output are given
    back. A view returned is valid until the next call."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._buffer = mmap.mmap(-1, max(limit, 1))
        self._dirty = 0

    def decompress(self, codec: int, data: Buffer) -> memoryview:
        if codec not in _DECOMPRESSORS or codec == NONE:
            raise _unsupported(codec)
        if self._dirty > _KEEP_RESIDENT:
            self._buffer.madvise(mmap.MADV_DONTNEED)
            self._dirty = 0
        try:
            if codec == SNAPPY:
                size = self._snappy_into(memoryview(data))
            else:
                size = _DECOMPRESS_INTO[codec](data, self._buffer)
        except KafkaError:
            self._dirty = self.limit  # a refused output may have filled the mapping
            raise
        except Exception as exc:  # cramjam's DecompressionError, and others on odd input
            self._dirty = self.limit
            if "whole buffer" in str(exc):
                raise self._too_large(codec) from None
            name = CODEC_NAMES[codec]
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"cannot decompress {name}: {exc}") from exc
        self._dirty = max(self._dirty, size)
        return memoryview(self._buffer)[:size]

    def _too_large(self, codec: int) -> KafkaError:
        return KafkaError(
            ErrorCode.MESSAGE_TOO_LARGE,
            f"{CODEC_NAMES[codec]} records decompress to more than "
            f"message.max.decompressed.bytes={self.limit}",
        )

    def _snappy_into(self, view: memoryview) -> int:
        """Raw snappy and xerial blocks state their decompressed length up front: it is
        checked before anything is decompressed."""
        snappy = cramjam.snappy
        if len(view) < _XERIAL_HEADER_SIZE or view[:8] != XERIAL_MAGIC:
            blocks = [view]
        else:
            blocks = []
            pos = _XERIAL_HEADER_SIZE
            end = len(view)
            while pos < end:
                if end - pos < 4:
                    raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "xerial snappy block cut short")
                (length,) = _INT32.unpack_from(view, pos)
                pos += 4
                if length < 0 or pos + length > end:
                    raise KafkaError(
                        ErrorCode.CORRUPT_MESSAGE, f"xerial snappy block length {length}"
                    )
                blocks.append(view[pos : pos + length])
                pos += length
        out = memoryview(self._buffer)
        try:
            at = 0
            for block in blocks:
                size = snappy.decompress_raw_len(block)
                if at + size > self.limit:
                    raise self._too_large(SNAPPY)
                at += snappy.decompress_raw_into(block, out[at:])
            return at
        finally:
            out.release()
