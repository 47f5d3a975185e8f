"""What a leader checks and rewrites in a produced record set by its topic's settings,
before the log numbers and writes it (Kafka's LogValidator, the parts that depend on
the topic): sizes (``max.message.bytes``, ``segment.bytes``), CreateTime timestamps
within ``message.timestamp.before.max.ms`` / ``after.max.ms``, and the codec batches
are stored in (``compression.type``, at ``compression.<codec>.level``)."""

from __future__ import annotations

from epochlog.protocol.batch import BatchHeader, WritableBatches, iter_batches
from epochlog.protocol.compression import GZIP, LZ4, ZSTD
from epochlog.protocol.errors import ErrorCode, KafkaError
from epochlog.protocol.recompression import CODECS, recompress_batch
from epochlog.protocol.record_validation import RecordErrors
from epochlog.protocol.records import iter_records
from epochlog.settings.registry import LONG_MAX
from epochlog.storage.config import LogConfig

Batches = list[tuple[int, BatchHeader]]
PRODUCER = "producer"
NO_TIMESTAMP = -1


def check_batches(records: WritableBatches, config: LogConfig) -> Batches:
    """Every batch's header and CRC, and the sizes the topic allows: MESSAGE_TOO_LARGE
    for a batch over ``max.message.bytes``, RECORD_LIST_TOO_LARGE for a record set
    that no segment could hold."""
    batches = iter_batches(records)
    for _, header in batches:
        if header.size > config.max_message_bytes:
            raise KafkaError(
                ErrorCode.MESSAGE_TOO_LARGE,
                f"batch of {header.size} bytes exceeds max.message.bytes "
                f"{config.max_message_bytes}",
            )
        if header.records_count <= 0 or header.last_offset_delta != header.records_count - 1:
            raise KafkaError(
                ErrorCode.INVALID_RECORD,
                f"batch claims {header.records_count} records with last offset delta "
                f"{header.last_offset_delta}",
            )
    if len(records) > config.segment_bytes:
        raise KafkaError(
            ErrorCode.RECORD_LIST_TOO_LARGE,
            f"record set of {len(records)} bytes exceeds segment.bytes",
        )
    return batches


def check_timestamps(
    records: WritableBatches, batches: Batches, config: LogConfig, now_ms: int
) -> None:
    """INVALID_TIMESTAMP naming every CreateTime record (record_errors) further behind
    or ahead of the broker's clock than the topic allows, as Kafka's LogValidator does
    (records without a timestamp pass)."""
    before, after = config.timestamp_bounds
    if config.log_append_time or (before == after == LONG_MAX):
        return  # the records are not decoded again for a topic without bounds
    earliest, latest = now_ms - before, now_ms + after
    for position, header in batches:
        if header.is_control:
            continue
        batch = memoryview(records)[position : position + header.size]
        bounds = f"[{earliest}, {latest}] (message.timestamp.before.max.ms / after.max.ms)"
        faults = [
            (
                record.offset - header.base_offset,
                f"timestamp {record.timestamp} is outside {bounds}",
            )
            for record in iter_records(batch, check_crc=False)
            if record.timestamp != NO_TIMESTAMP and not earliest <= record.timestamp <= latest
        ]
        if faults:
            index, message = faults[0]
            raise RecordErrors(
                f"record {index}: {message}", faults, code=ErrorCode.INVALID_TIMESTAMP
            )


def recompressed(records: WritableBatches, batches: Batches, config: LogConfig) -> WritableBatches:
    """The record set with every data batch in the topic's codec (unchanged under
    ``compression.type=producer``, or when every batch is already in it)."""
    if config.compression_type == PRODUCER:
        return records
    codec = CODECS[config.compression_type]
    level = {
        GZIP: config.compression_gzip_level,
        LZ4: config.compression_lz4_level,
        ZSTD: config.compression_zstd_level,
    }.get(codec)
    if all(h.compression == codec or h.is_control for _, h in batches):
        return records
    out = bytearray()
    for position, header in batches:
        if header.compression == codec or header.is_control:
            out += memoryview(records)[position : position + header.size]
        else:
            out += recompress_batch(records, position, header, codec, level)
    return out
