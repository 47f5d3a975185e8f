import struct

import crc32c
import pytest

from epochlog.protocol.batch import read_header
from epochlog.protocol.errors import ErrorCode, KafkaError
from epochlog.protocol.records import build_batch, iter_records
from epochlog.storage.config import LogConfig
from epochlog.storage.log import Log

from .conftest import batch


def slice_bytes(result):
    return b"".join(s.file.pread(s.size, s.position) for s in result.slices)


def headers_of(data):
    out, pos = [], 0
    while pos < len(data):
        h = read_header(data, pos)
        out.append(h)
        pos += h.size
    return out


def test_append_read_round_trip_patches_offsets_and_epochs(open_log):
    log = open_log()
    r1 = log.append_as_leader(batch(3), leader_epoch=0)
    r2 = log.append_as_leader(batch(2), leader_epoch=4)
    assert (r1.base_offset, r1.last_offset, r1.log_append_time) == (0, 2, -1)
    assert (r2.base_offset, r2.last_offset) == (3, 4)
    assert log.log_end_offset == 5
    data = slice_bytes(log.read(0, 1 << 20))
    hs = headers_of(data)
    assert [(h.base_offset, h.partition_leader_epoch) for h in hs] == [(0, 0), (3, 4)]
    assert [r.offset for r in iter_records(data[: hs[0].size])] == [0, 1, 2]
    assert log.epoch_cache.entries() == [(0, 0), (4, 3)]


def test_log_append_time_sets_timestamps_from_the_clock(open_log, clock):
    log = open_log(LogConfig(message_timestamp_type="LogAppendTime"))
    result = log.append_as_leader(batch(2, ts=5), leader_epoch=0)
    assert result.log_append_time == clock.now_ms
    data = slice_bytes(log.read(0, 1 << 20))
    assert [r.timestamp for r in iter_records(data)] == [clock.now_ms] * 2


def test_read_starts_at_the_batch_containing_the_offset(open_log):
    log = open_log()
    log.append_as_leader(batch(5), 0)
    log.append_as_leader(batch(5), 0)
    read = log.read(7, 1 << 20)
    assert [h.base_offset for h in headers_of(slice_bytes(read))] == [5]
    assert read.next_offset == 10
    assert log.read(10, 1 << 20).slices == []


def test_read_respects_max_offset(open_log):
    log = open_log()
    for _ in range(4):
        log.append_as_leader(batch(2), 0)
    read = log.read(0, 1 << 20, max_offset=4)
    assert [h.base_offset for h in headers_of(slice_bytes(read))] == [0, 2]
    assert read.next_offset == 4
    hs = headers_of(slice_bytes(log.read(0, 1 << 20, max_offset=5)))
    assert [h.base_offset for h in hs] == [0, 2, 4]
    assert log.read(4, 1 << 20, max_offset=4).slices == []


def test_read_respects_max_bytes_with_whole_batches_and_min_one_batch(open_log):
    log = open_log()
    for _ in range(4):
        log.append_as_leader(batch(1, size=100), 0)
    one = read_header(slice_bytes(log.read(0, 1 << 20))).size
    assert log.read(0, 2 * one + 10).size == 2 * one
    assert log.read(0, 2 * one + 10).next_offset == 2
    assert log.read(0, one - 1, min_one_batch=True).size == one
    assert log.read(0, one - 1, min_one_batch=True).next_offset == 1
    assert log.read(0, one - 1, min_one_batch=False).slices == []


def test_read_outside_the_log_is_offset_out_of_range(open_log):
    log = open_log()
    log.append_as_leader(batch(2), 0)
    for offset in (-1, 3):
        with pytest.raises(KafkaError) as e:
            log.read(offset, 100)
        assert e.value.code == ErrorCode.OFFSET_OUT_OF_RANGE


def test_append_rejects_corrupt_oversized_and_inconsistent_batches(open_log):
    log = open_log(LogConfig(max_message_bytes=200))
    corrupt = batch(1)
    corrupt[-1] ^= 0xFF
    with pytest.raises(KafkaError) as e:
        log.append_as_leader(corrupt, 0)
    assert e.value.code == ErrorCode.CORRUPT_MESSAGE
    with pytest.raises(KafkaError) as e:
        log.append_as_leader(batch(1, size=300), 0)
    assert e.value.code == ErrorCode.MESSAGE_TOO_LARGE
    bad_count = batch(2)
    struct.pack_into(">i", bad_count, 57, 3)  # records_count disagrees with the delta
    struct.pack_into(">I", bad_count, 17, crc32c.crc32c(bytes(bad_count[21:])))
    with pytest.raises(KafkaError) as e:
        log.append_as_leader(bad_count, 0)
    assert e.value.code == ErrorCode.INVALID_RECORD
    assert log.log_end_offset == 0


def test_append_as_follower_keeps_leader_offsets_and_learns_epochs(open_log):
    log = open_log()
    b = batch(3, base_offset=0, partition_leader_epoch=2)
    log.append_as_follower(b)
    b2 = batch(1, base_offset=3, partition_leader_epoch=5)
    log.append_as_follower(b2)
    assert log.log_end_offset == 4
    assert log.epoch_cache.entries() == [(2, 0), (5, 3)]
    with pytest.raises(KafkaError):
        log.append_as_follower(batch(1, base_offset=1, partition_leader_epoch=5))


def test_multi_batch_record_set_gets_consecutive_offsets(open_log):
    log = open_log()
    records = batch(2) + batch(3)
    result = log.append_as_leader(records, 1)
    assert (result.base_offset, result.last_offset) == (0, 4)
    hs = headers_of(slice_bytes(log.read(0, 1 << 20)))
    assert [h.base_offset for h in hs] == [0, 2]


def test_earliest_latest_carry_epochs(open_log):
    log = open_log()
    log.append_as_leader(batch(2), 1)
    log.append_as_leader(batch(2), 3)
    assert (log.earliest().offset, log.earliest().leader_epoch) == (0, 1)
    assert (log.latest().offset, log.latest().leader_epoch) == (4, 3)
    assert log.end_offset_for_epoch(1) == (1, 2)


def test_large_reads_use_the_index_and_return_many_whole_batches(open_log):
    log = open_log(LogConfig(index_interval_bytes=256))
    for _ in range(200):
        log.append_as_leader(batch(2, size=100), 0)
    one = read_header(slice_bytes(log.read(0, 1 << 20))).size
    for start in (0, 37, 101):
        result = log.read(start, 50 * one + 7, max_offset=300)
        hs = headers_of(slice_bytes(result))
        assert len(hs) == 50 and hs[0].base_offset == start - start % 2
        first = hs[0].base_offset
        assert [h.base_offset for h in hs] == list(range(first, first + 100, 2))
        assert result.next_offset == first + 100  # whether the index or the scan ended it
    hs = headers_of(slice_bytes(log.read(0, 1 << 20, max_offset=121)))
    assert hs[-1].base_offset == 120


@pytest.mark.parametrize("codec_name, codec", [("zstd", 4), ("gzip", 1), ("uncompressed", 0)])
def test_compression_type_rewrites_batches_in_the_topic_codec_keeping_producer_fields(
    open_log, codec_name, codec
):
    log = open_log(LogConfig(compression_type=codec_name))
    produced = batch(
        3, compression=3, producer_id=7, producer_epoch=2, base_sequence=0, is_transactional=True
    )
    log.append_as_leader(produced, leader_epoch=1)
    log.append_as_leader(batch(2, compression=3, producer_id=7, producer_epoch=2, base_sequence=3,
                               is_transactional=True), leader_epoch=1)  # fmt: skip
    data = slice_bytes(log.read(0, 1 << 20))
    first, second = headers_of(data)
    assert [h.compression for h in (first, second)] == [codec, codec]
    assert (first.base_offset, second.base_offset, second.partition_leader_epoch) == (0, 3, 1)
    assert (second.producer_id, second.producer_epoch, second.base_sequence) == (7, 2, 3)
    assert second.is_transactional and not second.is_log_append_time
    assert [r.offset for r in iter_records(data)] == [0, 1, 2]  # CRC checked
    assert [r.timestamp for r in iter_records(data[first.size :])] == [1000, 1001]


def test_compression_level_of_the_topic_is_used_when_rewriting(open_log, tmp_path, disk, clock):
    text = [(None, b"%d:%d " % (i, i * i % 9973) * 20, [], 1000) for i in range(200)]
    sizes = []
    for level in (-50, 19):
        config = LogConfig(compression_type="zstd", compression_zstd_level=level)
        log = Log.open(disk, clock, str(tmp_path / f"z{level}"), "z", 0, config)
        log.append_as_leader(bytearray(build_batch(text)), leader_epoch=0)
        (header,) = headers_of(slice_bytes(log.read(0, 1 << 20)))
        sizes.append(header.size)
    assert sizes[1] < sizes[0]


def test_compression_type_producer_keeps_the_producers_bytes(open_log):
    log = open_log(LogConfig(compression_type="producer"))
    produced = batch(3, compression=2)
    log.append_as_leader(bytearray(produced), leader_epoch=0)
    (header,) = headers_of(slice_bytes(log.read(0, 1 << 20)))
    assert header.compression == 2 and header.size == len(produced)


def test_create_time_outside_the_topics_bounds_is_invalid_timestamp(open_log, clock):
    log = open_log(
        LogConfig(message_timestamp_before_max_ms=60_000, message_timestamp_after_max_ms=1_000)
    )
    now = clock.now_ms
    log.append_as_leader(batch(2, ts=now - 60_000), leader_epoch=0)
    # Its first record too old; its second record (only) too new.
    for first_timestamp, at_fault in ((now - 60_001, 0), (now + 1_000, 1)):
        with pytest.raises(KafkaError) as refused:
            log.append_as_leader(batch(2, ts=first_timestamp), leader_epoch=0)
        assert refused.value.code == ErrorCode.INVALID_TIMESTAMP
        assert [index for index, _ in refused.value.record_errors] == [at_fault]
    assert log.log_end_offset == 2
    appended = open_log(LogConfig(message_timestamp_type="LogAppendTime",
                                  message_timestamp_before_max_ms=0))  # fmt: skip
    assert appended.append_as_leader(batch(1, ts=5), leader_epoch=0).log_append_time == now


def test_the_deprecated_difference_setting_bounds_both_ways(open_log, clock):
    log = open_log(LogConfig(message_timestamp_difference_max_ms=10))
    with pytest.raises(KafkaError) as refused:
        log.append_as_leader(batch(1, ts=clock.now_ms + 11), leader_epoch=0)
    assert refused.value.code == ErrorCode.INVALID_TIMESTAMP
    log.append_as_leader(batch(1, ts=clock.now_ms - 10), leader_epoch=0)


def test_a_full_segment_index_rolls_the_segment(open_log):
    # 3 offset index entries (8 bytes each) fit, 2 time index entries (12 bytes each).
    log = open_log(LogConfig(segment_index_bytes=24, index_interval_bytes=1))
    for i in range(12):
        log.append_as_leader(batch(1, ts=1000 + i), leader_epoch=0)
    assert len(log.segments) > 3
    for segment in log.segments:
        assert segment.offset_index.entries * 8 <= 24
        assert segment.time_index.entries * 12 <= 24


def test_flush_messages_fsyncs_once_that_many_records_are_unflushed(open_log):
    log = open_log(LogConfig(flush_messages=3))
    log.append_as_leader(batch(2), leader_epoch=0)
    assert log.recovery_point == 0
    log.append_as_leader(batch(1), leader_epoch=0)
    assert log.recovery_point == 3


def test_flush_ms_fsyncs_a_log_unflushed_that_long(open_log, clock):
    log = open_log(LogConfig(flush_ms=1_000))
    log.append_as_leader(batch(2), leader_epoch=0)
    clock.advance(999)
    assert not log.maybe_flush(clock.now_ms) and log.recovery_point == 0
    clock.advance(1)
    assert log.maybe_flush(clock.now_ms) and log.recovery_point == 2
