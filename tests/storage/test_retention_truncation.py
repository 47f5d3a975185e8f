import json
import os
from pathlib import Path

from epochlog.protocol.batch import read_header
from epochlog.storage.config import LogConfig

from .conftest import batch


def test_retention_by_time_deletes_old_segments_and_moves_log_start(open_log, clock):
    log = open_log(LogConfig(segment_bytes=400, retention_ms=10_000))
    now = clock.now_ms
    for i in range(12):
        log.append_as_leader(batch(2, ts=now - 60_000 if i < 6 else now, size=50), i // 6)
    before = [s.base_offset for s in log.segments]
    deleted = log.delete_segments_for_retention(now)
    assert deleted > 0
    assert log.log_start_offset == log.segments[0].base_offset > 0
    assert log.segments[0].max_timestamp >= now - 10_000
    assert len(log.segments) == len(before) - deleted
    assert log.epoch_cache.entries()[0][1] >= log.log_start_offset or (
        log.epoch_cache.entries()[0] == (0, log.log_start_offset)
    )
    assert log.earliest().offset == log.log_start_offset


def test_retention_by_size_keeps_at_most_retention_bytes_and_never_the_active(open_log, clock):
    log = open_log(LogConfig(segment_bytes=400, retention_bytes=800, retention_ms=-1))
    for _ in range(20):
        log.append_as_leader(batch(2, size=50), 0)
    log.delete_segments_for_retention(clock.now_ms)
    assert log.size_bytes <= 800 + log.active_segment.size
    assert log.log_start_offset == log.segments[0].base_offset
    log.config = LogConfig(segment_bytes=400, retention_bytes=0, retention_ms=-1)
    log.delete_segments_for_retention(clock.now_ms)
    assert len(log.segments) == 1 and log.active_segment.size > 0
    assert log.delete_segments_for_retention(clock.now_ms) == 0


def test_truncate_to_quarantines_what_it_removed(open_log, tmp_path):
    log = open_log(LogConfig(segment_bytes=400))
    for i in range(10):
        log.append_as_leader(batch(2, size=50), leader_epoch=1 if i < 5 else 2)
    removed = log.truncate_to(6)
    assert log.log_end_offset == 6
    assert (removed.first_offset, removed.last_offset, removed.epochs) == (6, 19, (1, 2))
    assert os.path.basename(removed.path) == f"{6:020d}-{19:020d}.log"
    data = Path(removed.path).read_bytes()
    assert len(data) == removed.size
    assert read_header(data).base_offset == 6
    meta = json.loads(Path(removed.path.replace(".log", ".json")).read_text())
    assert meta["epochs"] == [1, 2] and meta["reason"] == "truncate"
    assert log.epoch_cache.entries() == [(1, 0)]
    assert log.append_as_leader(batch(1), 3).base_offset == 6
    assert log.truncate_to(100) is None
    assert len(log.quarantine.list()) == 1


def test_truncate_fully_and_start_at(open_log):
    log = open_log()
    log.append_as_leader(batch(3), 0)
    removed = log.truncate_fully_and_start_at(50)
    assert removed is not None and (removed.first_offset, removed.last_offset) == (0, 2)
    assert (log.log_start_offset, log.log_end_offset) == (50, 50)
    assert log.append_as_leader(batch(1), 1).base_offset == 50


def test_offset_for_timestamp_finds_first_record_at_or_after(open_log):
    log = open_log(LogConfig(segment_bytes=500, index_interval_bytes=50))
    for i in range(20):
        log.append_as_leader(batch(3, ts=1000 + 10 * i, size=30), leader_epoch=i // 10)
    hit = log.offset_for_timestamp(1052)  # batch 5 holds ts 1050, 1051, 1052
    assert (hit.offset, hit.timestamp, hit.leader_epoch) == (17, 1052, 0)
    hit = log.offset_for_timestamp(1105)  # between batches: first of batch 11
    assert (hit.offset, hit.timestamp, hit.leader_epoch) == (33, 1110, 1)
    assert log.offset_for_timestamp(5000) is None
    assert log.offset_for_timestamp(0).offset == 0


def test_max_timestamp_returns_the_record_holding_it(open_log):
    log = open_log(LogConfig(segment_bytes=500))
    for i in range(10):
        log.append_as_leader(batch(3, ts=1000 + i, size=30), 0)
    log.append_as_leader(batch(3, ts=9000, size=30), 1)
    log.append_as_leader(batch(3, ts=2000, size=30), 1)
    hit = log.max_timestamp()
    assert (hit.offset, hit.timestamp, hit.leader_epoch) == (32, 9002, 1)
