"""The active segment's indexes answer from memory (bisect), sealed ones by binary search
over their files: both must give the same entry for every lookup a read makes."""

from __future__ import annotations

import tempfile

from hypothesis import given, settings
from hypothesis import strategies as st

from epochlog.seams.real import OsDisk
from epochlog.storage.index import OffsetIndex, TimeIndex

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
