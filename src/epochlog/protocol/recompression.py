"""A record batch rewritten in another codec, as Kafka's leader does for a topic whose
``compression.type`` names one: the records section is decompressed and compressed
again; the header keeps everything else (offsets, timestamps, producer id, epoch and
sequence, the transactional and control flags), with a new length, codec and CRC32C."""

from __future__ import annotations

import struct

import crc32c

from epochlog.protocol import batch as _batch
from epochlog.protocol.batch import BatchHeader, Buffer
from epochlog.protocol.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD, compress, decompress

# compression.type's codec names (Kafka's BrokerCompressionType) by attribute id.
CODECS = {"uncompressed": NONE, "gzip": GZIP, "snappy": SNAPPY, "lz4": LZ4, "zstd": ZSTD}


def recompress_batch(
    buf: Buffer, pos: int, header: BatchHeader, codec: int, level: int | None = None
) -> bytearray:
    """The batch at ``pos`` with its records section in ``codec`` (an attribute id), at
    ``level`` (None: Kafka's default for the codec)."""
    view = memoryview(buf)
    body: Buffer = view[pos + _batch.HEADER_SIZE : pos + header.size]
    if header.compression:
        body = decompress(header.compression, body)
    out = bytearray(view[pos : pos + _batch.HEADER_SIZE])
    out += compress(codec, body, level)
    attributes = (header.attributes & ~_batch.COMPRESSION_MASK) | codec
    struct.pack_into(">i", out, _batch.BATCH_LENGTH, len(out) - _batch.LOG_OVERHEAD)
    struct.pack_into(">h", out, _batch.ATTRIBUTES, attributes)
    struct.pack_into(">I", out, _batch.CRC, crc32c.crc32c(memoryview(out)[_batch.ATTRIBUTES :]))
    return out
