import os

from epochlog.protocol.batch import read_header
from epochlog.storage.config import DAY_MS, LogConfig
from epochlog.storage.log import Log

from .conftest import batch


def first_base(log, offset):
    s = log.read(offset, 1 << 20).slices[0]
    return read_header(s.file.pread(61, s.position)).base_offset


def test_roll_by_size_names_segments_like_kafka_and_lookups_work_across_them(open_log, tmp_path):
    log = open_log(LogConfig(segment_bytes=1000, index_interval_bytes=100))
    for _ in range(60):
        log.append_as_leader(batch(2, size=50), 0)
    assert len(log.segments) > 5
    names = sorted(os.listdir(tmp_path / "t-0"))
    assert "00000000000000000000.log" in names
    assert "00000000000000000000.index" in names
    assert "00000000000000000000.timeindex" in names
    for offset in range(0, 120):
        assert first_base(log, offset) == offset - offset % 2
    # sealed segments hold no in-memory index; the active one does
    assert all(s.offset_index._keys is None for s in log.segments[:-1])
    assert log.active_segment.offset_index._keys is not None
    assert log.segments[1].offset_index.entries > 0


def test_lookups_survive_reopen_with_indexes_read_from_files(open_log):
    log = open_log(LogConfig(segment_bytes=1000, index_interval_bytes=100))
    for _ in range(60):
        log.append_as_leader(batch(2, size=50), 0)
    log.close()
    log = open_log(LogConfig(segment_bytes=1000, index_interval_bytes=100), clean_shutdown=True)
    assert log.log_end_offset == 120
    for offset in range(0, 120, 7):
        assert first_base(log, offset) == offset - offset % 2
    assert log.append_as_leader(batch(1), 0).base_offset == 120


def test_roll_by_time_uses_first_batch_timestamp(open_log, clock):
    log = open_log(LogConfig(segment_ms=1000))
    log.append_as_leader(batch(1, ts=clock.now_ms), 0)
    log.append_as_leader(batch(1, ts=clock.now_ms + 500), 0)
    assert len(log.segments) == 1
    log.append_as_leader(batch(1, ts=clock.now_ms + 1500), 0)
    assert [s.base_offset for s in log.segments] == [0, 2]
    clock.advance(5000)
    assert log.maybe_roll(clock.now_ms)
    assert [s.base_offset for s in log.segments] == [0, 2, 3]
    assert not log.maybe_roll(clock.now_ms)  # empty active segment never rolls


def test_a_segment_ms_changed_on_a_live_log_rolls_by_the_new_age(open_log, clock):
    log = open_log(LogConfig(segment_ms=DAY_MS))
    log.append_as_leader(batch(1, ts=clock.now_ms), 0)
    log.append_as_leader(batch(1, ts=clock.now_ms + 1500), 0)
    assert len(log.segments) == 1
    log.config = LogConfig(segment_ms=1000)
    log.append_as_leader(batch(1, ts=clock.now_ms + 3000), 0)
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_segment_jitter_rolls_segments_early_by_an_amount_fixed_per_segment(disk, clock, tmp_path):
    def roll_ages(config: LogConfig, run: str) -> list[int]:
        """How old each partition's first segment is when maybe_roll first rolls it."""
        start = clock.now_ms
        logs = [
            Log.open(disk, clock, str(tmp_path / run / f"t-{p}"), "t", p, config) for p in range(8)
        ]
        for log in logs:
            log.append_as_leader(batch(1, ts=clock.now_ms), 0)
        rolled: dict[int, int] = {}
        while len(rolled) < len(logs):
            clock.advance(10)
            for partition, log in enumerate(logs):
                if partition not in rolled and log.maybe_roll(clock.now_ms):
                    rolled[partition] = clock.now_ms - start
        ages = [rolled[p] for p in range(len(logs))]
        clock.now_ms = start
        return ages

    assert set(roll_ages(LogConfig(segment_ms=10_000), "plain")) == {10_010}
    jittered_config = LogConfig(segment_ms=10_000, segment_jitter_ms=5_000)
    jittered = roll_ages(jittered_config, "jittered")
    assert all(5_000 < age <= 10_010 for age in jittered) and len(set(jittered)) > 3
    assert roll_ages(jittered_config, "again") == jittered  # fixed per segment


def test_corrupt_index_is_rebuilt_on_open(open_log, tmp_path):
    config = LogConfig(segment_bytes=1000, index_interval_bytes=100)
    log = open_log(config)
    for _ in range(30):
        log.append_as_leader(batch(2, size=50), 0)
    log.close()
    index = tmp_path / "t-0" / "00000000000000000000.index"
    index.write_bytes(index.read_bytes()[:-3])  # not a whole number of entries
    log = open_log(config, clean_shutdown=True)
    assert index.stat().st_size % 8 == 0
    assert first_base(log, 5) == 4
