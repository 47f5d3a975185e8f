"""The active segment's indexes answer from memory (bisect), sealed ones by binary search
over their files: both must give the same entry for every lookup a read makes."""

from __future__ import annotations

import os
import tempfile

from hypothesis import given, settings
from hypothesis import strategies as st

from epochlog.seams.real import OsDisk
from epochlog.storage.config import LogConfig
from epochlog.storage.index import WRITE_BEHIND_ENTRIES, OffsetIndex, TimeIndex

from .conftest import batch

BASE = 1000
# Strictly growing (offset, position) and (timestamp, offset) steps, as segments write them.
steps = st.lists(st.tuples(st.integers(1, 50), st.integers(1, 5000)), max_size=40)
probes = st.lists(st.integers(-10, 200_000), min_size=1, max_size=20)


def _offset_index(path: str, entries: list[tuple[int, int]]) -> OffsetIndex:
    index = OffsetIndex(OsDisk(), path, BASE)
    offset, position = BASE, 0
    for offset_step, position_step in entries:
        offset += offset_step
        position += position_step
        index.append(offset, position)
    return index


@settings(max_examples=150, deadline=None)
@given(entries=steps, offsets=probes, positions=probes)
def test_offset_index_lookups_agree_from_memory_and_from_the_file(entries, offsets, positions):
    with tempfile.TemporaryDirectory() as tmp:
        index = _offset_index(f"{tmp}/0.index", entries)
        on_file = (
            [index.lookup(BASE + o) for o in offsets],
            [index.floor_position(p, BASE + o) for p, o in zip(positions, offsets, strict=False)],
            [index.entries_before_position(p) for p in positions],
        )
        index.load()
        in_memory = (
            [index.lookup(BASE + o) for o in offsets],
            [index.floor_position(p, BASE + o) for p, o in zip(positions, offsets, strict=False)],
            [index.entries_before_position(p) for p in positions],
        )
        index.close()
    assert in_memory == on_file


@settings(max_examples=150, deadline=None)
@given(entries=steps, stamps=probes)
def test_time_index_lookups_agree_from_memory_and_from_the_file(entries, stamps):
    with tempfile.TemporaryDirectory() as tmp:
        index = TimeIndex(OsDisk(), f"{tmp}/0.timeindex", BASE)
        timestamp, offset = 0, BASE
        for stamp_step, offset_step in entries:
            timestamp += stamp_step
            offset += offset_step
            index.maybe_append(timestamp, offset)
        on_file = [index.lookup_before(t) for t in stamps]
        index.load()
        in_memory = [index.lookup_before(t) for t in stamps]
        index.close()
    assert in_memory == on_file


def test_floor_position_stops_at_whichever_limit_comes_first(tmp_path):
    index = _offset_index(str(tmp_path / "0.index"), [(10, 100), (10, 100), (10, 100)])
    index.load()
    # Entries: (1010, 100), (1020, 200), (1030, 300).
    assert index.floor_position(250, 2000) == (1020, 200)  # the byte limit first
    assert index.floor_position(1000, 1030) == (1020, 200)  # the offset limit first
    assert index.floor_position(99, 2000) is None
    assert index.floor_position(1000, 1010) is None


def test_the_active_segments_entries_reach_the_file_in_groups_and_all_at_a_flush(tmp_path):
    index = OffsetIndex(OsDisk(), str(tmp_path / "0.index"), BASE)
    index.load()
    for i in range(WRITE_BEHIND_ENTRIES - 1):
        index.append(BASE + i, 100 * i)
    assert index.entries == WRITE_BEHIND_ENTRIES - 1
    assert index.lookup(BASE + 5) == (BASE + 5, 500)  # answered from memory
    assert os.path.getsize(tmp_path / "0.index") == 0
    index.flush()
    assert os.path.getsize(tmp_path / "0.index") == 8 * (WRITE_BEHIND_ENTRIES - 1)
    index.append(BASE + 1000, 100_000)
    index.unload()  # (a seal): lookups now read the file, which has every entry
    assert index.lookup(BASE + 2000) == (BASE + 1000, 100_000)
    index.close()


def test_a_segment_writes_both_indexes_together_every_group_of_entries(open_log, tmp_path):
    """Every batch here is past index.interval.bytes, so each gets an entry in both
    indexes: after a group they are on disk together, a batch less is still in memory."""
    log = open_log(LogConfig(index_interval_bytes=10))
    for i in range(WRITE_BEHIND_ENTRIES + 2):
        log.append_as_leader(batch(1, ts=1000 + i, size=40), leader_epoch=0)
    directory = tmp_path / "t-0"
    (offsets,) = directory.glob("*.index")
    (times,) = directory.glob("*.timeindex")
    # The first batch gets no entry (nothing before it was indexed), then one each.
    assert offsets.stat().st_size == 8 * WRITE_BEHIND_ENTRIES
    assert times.stat().st_size == 12 * WRITE_BEHIND_ENTRIES
    assert log.segments[-1].offset_index.entries == WRITE_BEHIND_ENTRIES + 1
    log.close()
    assert offsets.stat().st_size == 8 * (WRITE_BEHIND_ENTRIES + 1)
    reopened = open_log(LogConfig(index_interval_bytes=10), clean_shutdown=True)
    assert reopened.read(WRITE_BEHIND_ENTRIES + 1, 1 << 20).next_offset == WRITE_BEHIND_ENTRIES + 2
