"""The log cleaner: compaction keeps each key's latest record at its original offset,
tombstones for ``delete.retention.ms``, never touches the active segment or anything at
or above the bound, and a crash during a swap recovers to a consistent log."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from epochlog.coordinator.records import (
    OffsetKey,
    OffsetValue,
    encode_offset_key,
    encode_offset_value,
)
from epochlog.protocol.batch import read_header
from epochlog.protocol.errors import ErrorCode, KafkaError
from epochlog.protocol.records import Record, build_batch, iter_records
from epochlog.storage.cleaner import CLEANER_CHECKPOINT, LogCleaner, dirty_ratio
from epochlog.storage.config import DAY_MS, LogConfig
from epochlog.storage.log import Log
from epochlog.storage.log_manager import LogManager, LogManagerSettings

COMPACT = LogConfig(cleanup_policy="compact", segment_bytes=1 << 20)
GZIP = 1


def keyed(*records: tuple[bytes, bytes | None], ts: int = 1000, **kwargs: object) -> bytearray:
    """A batch of (key, value) records with timestamps ts, ts+1, ..."""
    rows = [(k, v, [("h", k)], ts + i) for i, (k, v) in enumerate(records)]
    return bytearray(build_batch(rows, **kwargs))


def stored(log: Log) -> list[tuple[int, Record, int]]:
    """(offset, record, leader epoch of its batch) of every record a consumer can read,
    fetching from the log start the way a consumer does (next offset after the last)."""
    out: list[tuple[int, Record, int]] = []
    position = log.log_start_offset
    while position < log.log_end_offset:
        result = log.read(position, 1 << 20)
        assert result.slices, f"no batch at or after {position}"
        for piece in result.slices:
            data = piece.file.pread(piece.size, piece.position)
            pos = 0
            while pos < len(data):
                header = read_header(data, pos)
                for record in iter_records(data[pos : pos + header.size]):
                    if record.offset >= position:
                        out.append((record.offset, record, header.partition_leader_epoch))
                position = header.next_offset
                pos += header.size
    return out


def latest_values(log: Log) -> dict[bytes, bytes]:
    """Replay the log as a compacted-topic reader does: last write wins, None deletes."""
    state: dict[bytes, bytes] = {}
    for _, record, _ in stored(log):
        assert record.key is not None
        if record.value is None:
            state.pop(bytes(record.key), None)
        else:
            state[bytes(record.key)] = bytes(record.value)
    return state


def clean(log: Log, clock, first_dirty: int | None = None, bound: int | None = None):
    cleaner = LogCleaner(log.disk, clock)
    start = log.log_start_offset if first_dirty is None else first_dirty
    end = log.log_end_offset if bound is None else bound
    return cleaner.clean(log, start, end, clock.now_ms)


def test_latest_value_per_key_survives_with_its_original_offset_timestamp_headers_epoch(
    open_log, clock
):
    log = open_log(COMPACT)
    log.append_as_leader(keyed((b"a", b"a1"), (b"b", b"b1"), ts=100), leader_epoch=3)  # 0, 1
    log.append_as_leader(keyed((b"a", b"a2"), (b"c", b"c1"), ts=200), leader_epoch=4)  # 2, 3
    log.roll()
    log.append_as_leader(keyed((b"b", b"b2"), ts=300), leader_epoch=5)  # 4
    log.roll()
    log.append_as_leader(keyed((b"z", b"z1"), ts=400), leader_epoch=5)  # 5, active
    before = {off: (rec, epoch) for off, rec, epoch in stored(log)}

    stats, first_dirty = clean(log, clock)

    after = stored(log)
    assert [off for off, _, _ in after] == [2, 3, 4, 5]
    for offset, record, epoch in after:
        original, original_epoch = before[offset]
        assert (record.key, record.value, record.timestamp, record.headers) == (
            original.key,
            original.value,
            original.timestamp,
            original.headers,
        )
        assert epoch == original_epoch
    assert log.log_end_offset == 6
    assert first_dirty == log.active_segment.base_offset == 5
    assert (stats.records_removed, stats.tombstones_removed, stats.keys) == (2, 0, 3)
    assert stats.segments_before == 2 and stats.segments_after == 1  # merged
    assert stats.bytes_after < stats.bytes_before


def test_split_batch_keeps_producer_fields_sequence_and_compression(open_log, clock):
    log = open_log(COMPACT)
    records = [(b"a", b"1"), (b"b", b"1"), (b"a", b"2"), (b"c", b"1"), (b"b", b"2")]
    log.append_as_leader(
        keyed(*records, producer_id=7, producer_epoch=2, base_sequence=10, compression=GZIP),
        leader_epoch=1,
    )
    log.roll()
    clean(log, clock)

    headers = [h for s in log.segments for _, h in s.iter_headers()]
    # Survivors 2, 3, 4 are one run: one batch, offsets and sequence where they were.
    assert [(h.base_offset, h.last_offset) for h in headers] == [(2, 4)]
    (h,) = headers
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (7, 2, 12)
    assert h.compression == GZIP and h.partition_leader_epoch == 1
    assert [off for off, _, _ in stored(log)] == [2, 3, 4]


def test_tombstone_kept_before_delete_retention_and_removed_after(open_log, clock):
    config = LogConfig(cleanup_policy="compact", delete_retention_ms=DAY_MS)
    log = open_log(config)
    now = clock.now_ms
    log.append_as_leader(keyed((b"a", b"a1"), (b"b", b"b1"), ts=now), leader_epoch=0)
    log.append_as_leader(keyed((b"a", None), ts=now), leader_epoch=0)  # tombstone, offset 2
    log.roll()
    stats, first_dirty = clean(log, clock)
    assert [(o, r.key, r.value) for o, r, _ in stored(log)] == [(1, b"b", b"b1"), (2, b"a", None)]
    assert stats.tombstones_removed == 0

    clock.advance(DAY_MS)  # exactly the retention: still kept
    log.append_as_leader(keyed((b"c", b"c1"), ts=clock.now_ms), leader_epoch=0)
    log.roll()
    _, first_dirty = clean(log, clock, first_dirty)
    assert (2, b"a", None) in [(o, r.key, r.value) for o, r, _ in stored(log)]

    clock.advance(1)
    log.append_as_leader(keyed((b"d", b"d1"), ts=clock.now_ms), leader_epoch=0)
    log.roll()
    stats, _ = clean(log, clock, first_dirty)
    assert [(o, r.key) for o, r, _ in stored(log)] == [(1, b"b"), (3, b"c"), (4, b"d")]
    assert stats.tombstones_removed == 1


def test_active_segment_is_never_cleaned(open_log, clock):
    log = open_log(COMPACT)
    log.append_as_leader(keyed((b"a", b"old")), leader_epoch=0)
    log.roll()
    log.append_as_leader(keyed((b"a", b"new"), (b"a", b"newer")), leader_epoch=0)
    active_bytes = log.active_segment.file.pread(log.active_segment.size, 0)

    # The sealed segment alone has nothing superseded within it: nothing to remove.
    stats, _ = clean(log, clock)
    assert stats.records_removed == 0
    assert [(o, r.value) for o, r, _ in stored(log)] == [(0, b"old"), (1, b"new"), (2, b"newer")]
    assert log.active_segment.file.pread(log.active_segment.size, 0) == active_bytes


def test_nothing_at_or_above_the_bound_is_cleaned(open_log, clock):
    log = open_log(COMPACT)
    log.append_as_leader(keyed((b"a", b"1")), leader_epoch=0)  # 0
    log.roll()
    log.append_as_leader(keyed((b"a", b"2")), leader_epoch=0)  # 1: sealed but uncommitted
    log.roll()
    log.append_as_leader(keyed((b"x", b"1")), leader_epoch=0)

    # The high watermark is 1: the newer value at 1 may still be truncated away, so the
    # committed value at 0 must not be compacted on its account.
    assert dirty_ratio(log, 0, 1) == 1.0
    stats, first_dirty = clean(log, clock, bound=1)
    assert stats.records_removed == 0 and first_dirty == 1
    assert clean(log, clock, first_dirty=1, bound=1) is None
    stats, _ = clean(log, clock, first_dirty=1, bound=2)
    assert [(o, r.value) for o, r, _ in stored(log)] == [(1, b"2"), (2, b"1")]


def test_consumer_visible_offsets_stay_monotonic_with_gaps(open_log, clock):
    log = open_log(LogConfig(cleanup_policy="compact", segment_bytes=600))
    for i in range(60):
        log.append_as_leader(keyed((b"k%d" % (i % 7), b"v%d" % i)), leader_epoch=i // 20)
    log.roll()
    end = log.log_end_offset
    clean(log, clock)

    offsets = [o for o, _, _ in stored(log)]
    assert offsets == sorted(set(offsets)) and len(offsets) == 7
    assert offsets == list(range(53, 60))
    assert log.log_end_offset == end
    # A fetch at a removed offset gets the next surviving batch.
    result = log.read(10, 1 << 20)
    first = read_header(result.slices[0].file.pread(61, result.slices[0].position))
    assert first.base_offset == 53
    assert log.offset_for_timestamp(0).offset == 53
    log.append_as_leader(keyed((b"k0", b"after")), leader_epoch=3)
    assert stored(log)[-1][0] == end


def _build_dirty_log(open_log, clock) -> Log:
    log = open_log(LogConfig(cleanup_policy="compact", segment_bytes=400))
    for i in range(40):
        value = None if i in (30, 31) else b"v%d" % i
        log.append_as_leader(keyed((b"k%d" % (i % 5), value), ts=clock.now_ms), leader_epoch=1)
    log.roll()
    return log


@pytest.mark.parametrize("removed_old", ["none", "first", "all"])
def test_crash_after_swap_rename_finishes_the_swap_on_recovery(
    open_log, disk, clock, tmp_path: Path, removed_old: str
):
    log = _build_dirty_log(open_log, clock)
    expected_values = latest_values(log)
    log.close()
    original = tmp_path / "t-0"
    copy = tmp_path / "copy" / "t-0"
    shutil.copytree(original, copy)
    # Cleaned with a larger segment size, so one cleaned segment replaces several.
    cleaned = Log.open(disk, clock, str(copy), "t", 0, COMPACT, clean_shutdown=True)
    clean(cleaned, clock)
    expected = [(o, r.key, r.value) for o, r, _ in stored(cleaned)]
    assert len(expected) < 40
    cleaned_base = cleaned.segments[0].base_offset
    cleaned_log = Path(cleaned.segments[0].log_path)
    cleaned_end = cleaned.segments[1].base_offset
    cleaned.close()

    # The crash: the swap file is in place, the old segments are (partly) still there.
    old = sorted(p for p in original.glob("*.log") if int(p.stem) < cleaned_end)
    assert len(old) > 1
    shutil.copy(cleaned_log, original / f"{cleaned_base:020d}.log.swap")
    doomed = {"none": [], "first": old[:1], "all": old}[removed_old]
    for path in doomed:
        for suffix in (".log", ".index", ".timeindex"):
            path.with_suffix(suffix).unlink()

    recovered = Log.open(disk, clock, str(original), "t", 0, log.config, clean_shutdown=False)
    assert [(o, r.key, r.value) for o, r, _ in stored(recovered)] == expected
    assert latest_values(recovered) == expected_values
    assert not list(original.glob("*.swap"))
    recovered.close()


def test_crash_before_swap_discards_the_cleaned_file(open_log, disk, clock, tmp_path: Path):
    log = _build_dirty_log(open_log, clock)
    expected = [(o, r.key, r.value) for o, r, _ in stored(log)]
    log.close()
    directory = tmp_path / "t-0"
    (directory / f"{0:020d}.log.cleaned").write_bytes(b"half written cleaned segment")

    recovered = Log.open(disk, clock, str(directory), "t", 0, log.config, clean_shutdown=False)
    assert [(o, r.key, r.value) for o, r, _ in stored(recovered)] == expected
    assert not list(directory.glob("*.cleaned"))


def test_retention_does_not_delete_from_a_compact_only_topic(open_log, clock):
    for policy, deletes in (("compact", False), ("compact,delete", True), ("delete", True)):
        log = open_log(LogConfig(cleanup_policy=policy, retention_ms=1, retention_bytes=1))
        log.append_as_leader(keyed((b"a", b"1"), ts=0), leader_epoch=0)
        log.roll()
        log.append_as_leader(keyed((b"a", b"2"), ts=0), leader_epoch=0)
        assert (log.delete_segments_for_retention(clock.now_ms) > 0) is deletes, policy
        log.delete()


def test_null_key_refused_on_a_compacted_topic(open_log):
    log = open_log(COMPACT)
    with pytest.raises(KafkaError) as raised:
        log.append_as_leader(keyed((b"a", b"1"), (None, b"2")), leader_epoch=0)  # type: ignore[arg-type]
    assert raised.value.code == ErrorCode.INVALID_RECORD
    assert log.log_end_offset == 0
    log.delete()
    plain = open_log(LogConfig())
    plain.append_as_leader(keyed((None, b"2")), leader_epoch=0)  # type: ignore[arg-type]
    assert plain.log_end_offset == 1


def test_compacted_consumer_offsets_log_reloads_to_the_same_latest_values(disk, clock, tmp_path):
    settings = LogManagerSettings(cleaner_backoff_ms=15_000)
    config = LogConfig(cleanup_policy="compact", segment_bytes=2000, delete_retention_ms=1000)
    manager = LogManager(disk, clock, [str(tmp_path)], config, settings)
    manager.start()
    log = manager.create_log("__consumer_offsets", 0, config)
    for i in range(120):
        key = encode_offset_key(OffsetKey(f"g{i % 3}", "t", i % 4))
        value = encode_offset_value(OffsetValue(i, 2, "", clock.now_ms))
        log.append_as_leader(bytearray(build_batch([(key, value, [], clock.now_ms)])), 2)
    gone = encode_offset_key(OffsetKey("g0", "t", 0))
    log.append_as_leader(bytearray(build_batch([(gone, None, [], clock.now_ms)])), 2)
    log.roll()
    expected = latest_values(log)
    size_before = log.size_bytes

    assert manager.clean_logs(clock.now_ms) == 0  # no high-watermark source: idle
    manager.high_watermark = lambda topic, partition: log.log_end_offset
    assert manager.clean_logs(clock.now_ms) == 1
    assert latest_values(log) == expected and log.size_bytes < size_before
    assert manager.clean_logs(clock.now_ms) == 0  # nothing dirty now
    manager.close()

    checkpoint = (tmp_path / CLEANER_CHECKPOINT).read_text().split()
    assert checkpoint[-3:] == ["__consumer_offsets", "0", str(log.log_end_offset)]
    reopened = LogManager(disk, clock, [str(tmp_path)], config, settings)
    reopened.start(lambda _: config)
    again = reopened.get_log("__consumer_offsets", 0)
    assert again is not None
    assert latest_values(again) == expected
    assert reopened.first_dirty_offset(again) == again.log_end_offset
    reopened.close()


def test_log_manager_cleans_on_the_backoff_only_when_dirty_enough(disk, clock, tmp_path):
    settings = LogManagerSettings(cleaner_backoff_ms=15_000)
    config = LogConfig(cleanup_policy="compact", min_cleanable_dirty_ratio=0.9)
    manager = LogManager(disk, clock, [str(tmp_path)], config, settings)
    manager.start()
    log = manager.create_log("c", 0, config)
    manager.high_watermark = lambda topic, partition: log.log_end_offset
    for i in range(10):
        log.append_as_leader(keyed((b"k", b"%d" % i)), leader_epoch=0)
    log.roll()
    log.append_as_leader(keyed((b"k", b"live")), leader_epoch=0)

    async def run() -> None:
        stop = asyncio.Event()
        task = asyncio.ensure_future(manager.run_background(stop))
        start = clock.now_ms
        while clock.now_ms < start + 14_000:
            await asyncio.sleep(0)
        assert len(stored(log)) == 11  # not yet due
        while clock.now_ms < start + 16_000:
            await asyncio.sleep(0)
        for _ in range(1000):  # the pass hands its fsync to a worker thread
            if len(stored(log)) == 2:
                break
            await asyncio.sleep(0.01)
        stop.set()
        await task

    asyncio.run(run())
    assert [r.value for _, r, _ in stored(log)] == [b"9", b"live"]

    # Cleaned part 1 segment, one new dirty segment of similar size: ratio about 0.5.
    log.append_as_leader(keyed((b"k", b"x")), leader_epoch=0)
    log.roll()
    assert dirty_ratio(log, manager.first_dirty_offset(log), log.log_end_offset) < 0.9
    assert manager.clean_logs(clock.now_ms) == 0
    manager.close()


def _compacted_manager(disk, clock, tmp_path, config: LogConfig) -> tuple[LogManager, Log]:
    manager = LogManager(disk, clock, [str(tmp_path)], config, LogManagerSettings())
    manager.start()
    log = manager.create_log("c", 0, config)
    manager.high_watermark = lambda topic, partition: log.log_end_offset
    return manager, log


def test_min_compaction_lag_leaves_young_records_uncompacted(disk, clock, tmp_path):
    config = LogConfig(cleanup_policy="compact", min_compaction_lag_ms=60_000)
    manager, log = _compacted_manager(disk, clock, tmp_path, config)
    for i in range(4):
        log.append_as_leader(keyed((b"k", b"%d" % i), ts=clock.now_ms), leader_epoch=0)
        log.roll()
    log.append_as_leader(keyed((b"k", b"live"), ts=clock.now_ms), leader_epoch=0)
    assert manager.clean_logs(clock.now_ms) == 0
    assert len(stored(log)) == 5
    clock.advance(60_001)
    assert manager.clean_logs(clock.now_ms) == 1
    assert [r.value for _, r, _ in stored(log)] == [b"3", b"live"]
    manager.close()


def test_max_compaction_lag_cleans_a_log_below_the_dirty_ratio(disk, clock, tmp_path):
    config = LogConfig(cleanup_policy="compact", min_cleanable_dirty_ratio=1.0,
                       max_compaction_lag_ms=60_000)  # fmt: skip
    manager, log = _compacted_manager(disk, clock, tmp_path, config)
    for i in range(4):
        log.append_as_leader(keyed((b"k", b"%d" % i), ts=clock.now_ms), leader_epoch=0)
        log.roll()
    log.append_as_leader(keyed((b"k", b"live"), ts=clock.now_ms), leader_epoch=0)
    manager._first_dirty[("c", 0)] = 1  # one clean segment keeps the ratio below 1.0
    assert manager.clean_logs(clock.now_ms) == 0
    clock.advance(60_001)
    assert manager.clean_logs(clock.now_ms) == 1
    manager.close()


def test_max_compaction_lag_rolls_the_active_segment_of_a_compacted_topic(open_log, clock):
    log = open_log(LogConfig(cleanup_policy="compact", max_compaction_lag_ms=1_000))
    log.append_as_leader(keyed((b"k", b"1"), ts=clock.now_ms), leader_epoch=0)
    clock.advance(1_001)
    assert log.maybe_roll(clock.now_ms)
