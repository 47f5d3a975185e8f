"""Record batch (magic 2) headers: read, validate and patch without copying records.

The broker stores batches as received. Only ``baseOffset`` and ``partitionLeaderEpoch``
are rewritten, and both lie outside the CRC32C; a topic's settings can ask for more
(LogAppendTime here, a codec of its own in ``recompression``), and then the CRC is
recomputed.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

import crc32c

from epochlog.protocol.errors import ErrorCode, KafkaError

# Whatever record batches are read from: a frame, a file's bytes, a view of either.
Buffer = bytes | bytearray | memoryview
# Record batches the broker patches in place as it appends them (offsets, leader epoch):
# its own copy, or a view of the request frame they came in.
WritableBatches = bytearray | memoryview

# Offsets of the fixed fields within a batch.
BASE_OFFSET = 0
BATCH_LENGTH = 8
PARTITION_LEADER_EPOCH = 12
MAGIC = 16
CRC = 17
ATTRIBUTES = 21
LAST_OFFSET_DELTA = 23
BASE_TIMESTAMP = 27
MAX_TIMESTAMP = 35
PRODUCER_ID = 43
PRODUCER_EPOCH = 51
BASE_SEQUENCE = 53
RECORDS_COUNT = 57
HEADER_SIZE = 61
# baseOffset and batchLength precede what batchLength counts.
LOG_OVERHEAD = 12

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20

NO_PRODUCER_ID = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

_HEADER = struct.Struct(">qiibIhiqqqhii")
# baseOffset, batchLength (written back as it is) and partitionLeaderEpoch.
_OFFSET_AND_EPOCH = struct.Struct(">qii")
_PRODUCER = struct.Struct(">qh")


class BatchHeader(NamedTuple):
    """A batch's fixed header, as stored. A named tuple: the broker makes two for every
    batch it appends, and a frozen dataclass took 0.9 us to build against 0.15."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_BIT)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF


def read_header(buf: Buffer, pos: int = 0) -> BatchHeader:
    """Parse the fixed header at ``pos``; raises CORRUPT_MESSAGE if it cannot be one."""
    if len(buf) - pos < HEADER_SIZE:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "record batch shorter than its header")
    header = BatchHeader._make(_HEADER.unpack_from(buf, pos))
    if header.magic != 2:
        raise KafkaError(
            ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT, f"record batch magic {header.magic}, not 2"
        )
    if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"batch length {header.batch_length}")
    return header


def first_is_transactional(buf: Buffer) -> bool:
    """Whether the first batch says it is transactional, from its attributes' low byte
    alone: asked of every partition of a Produce before the append parses the header
    (a batch that is no batch is refused there)."""
    if len(buf) < HEADER_SIZE or buf[MAGIC] != 2:
        return False
    return bool(buf[ATTRIBUTES + 1] & TRANSACTIONAL_BIT)


def transactional_producer(buf: Buffer) -> tuple[int, int] | None:
    """(producer id, epoch) of the first batch when it says it is transactional, read as
    ``first_is_transactional`` reads the flag: whose transaction a leader asks the
    coordinator about before appending (KIP-890)."""
    if not first_is_transactional(buf):
        return None
    producer_id, epoch = _PRODUCER.unpack_from(buf, PRODUCER_ID)
    return producer_id, epoch


def validate_batch(buf: Buffer, pos: int = 0, available: int | None = None) -> BatchHeader:
    """Check structure and CRC32C of the batch at ``pos`` (CORRUPT_MESSAGE if wrong)."""
    header = read_header(buf, pos)
    end = pos + header.batch_length + LOG_OVERHEAD  # header.size, without the call
    if end > (len(buf) if available is None else pos + available):
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "record batch cut short")
    if header.records_count < 0 or header.last_offset_delta < 0:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "negative record count or offset delta")
    if crc32c.crc32c(memoryview(buf)[pos + ATTRIBUTES : end]) != header.crc:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "record batch CRC32C mismatch")
    return header


def iter_batches(buf: Buffer) -> list[tuple[int, BatchHeader]]:
    """Validate every batch of a produced record set; returns (position, header) pairs."""
    out = []
    pos = 0
    total = len(buf)
    while pos < total:
        header = validate_batch(buf, pos)
        out.append((pos, header))
        pos += header.batch_length + LOG_OVERHEAD
    if not out:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "empty record set")
    return out


def patch_offset_and_epoch(
    buf: WritableBatches, pos: int, header: BatchHeader, base_offset: int, leader_epoch: int
) -> BatchHeader:
    """Assign the batch at ``pos`` (whose header is ``header``) its log offset and the
    leader epoch that appended it; returns the header as patched."""
    _OFFSET_AND_EPOCH.pack_into(buf, pos, base_offset, header.batch_length, leader_epoch)
    return tuple.__new__(BatchHeader, (base_offset, header[1], leader_epoch, *header[3:]))


def patch_log_append_time(buf: WritableBatches, pos: int, timestamp: int) -> None:
    """For ``message.timestamp.type=LogAppendTime``: set the type bit and max timestamp,
    then recompute the CRC, which covers both."""
    (attributes,) = struct.unpack_from(">h", buf, pos + ATTRIBUTES)
    struct.pack_into(">h", buf, pos + ATTRIBUTES, attributes | TIMESTAMP_TYPE_BIT)
    struct.pack_into(">q", buf, pos + MAX_TIMESTAMP, timestamp)
    (length,) = struct.unpack_from(">i", buf, pos + BATCH_LENGTH)
    end = pos + length + LOG_OVERHEAD
    struct.pack_into(">I", buf, pos + CRC, crc32c.crc32c(memoryview(buf)[pos + ATTRIBUTES : end]))
