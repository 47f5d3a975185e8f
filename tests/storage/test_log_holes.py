"""Holes: a damaged batch with good batches after it costs only its own bytes. Its
extent is found, only those bytes go to quarantine, nothing of it is ever read, no
offset of it is given out again, and a replica's byte-identical copy fills it in place;
a copy that does not fit means the replica's log differs there, and this log truncates
to the hole's start as after a divergence."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from epochlog.protocol.batch import HEADER_SIZE, validate_batch
from epochlog.protocol.errors import ErrorCode, KafkaError
from epochlog.protocol.records import build_batch
from epochlog.seams.real import OsDisk
from epochlog.storage.checkpoints import CLEAN_SHUTDOWN_FILE
from epochlog.storage.config import LogConfig
from epochlog.storage.log import Log
from epochlog.storage.log_holes import RepairMismatch
from epochlog.storage.log_manager import LogManager
from epochlog.storage.scrubber import Scrubber
from support.segments import BatchSpan, batch_spans, flip_bytes

from .conftest import FakeClock, batch

CONFIG = LogConfig(segment_bytes=2000, index_interval_bytes=100)
BATCHES = 40


def _fill(log: Log) -> None:
    for i in range(BATCHES):
        log.append_as_leader(batch(2, ts=1000 + 2 * i, size=40), leader_epoch=i // 15)


def _crash(log: Log) -> None:
    for segment in log.segments:
        segment.close()


def _segments(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "t-0").glob("*.log"))


def _served(log: Log, start: int | None = None) -> list[tuple[int, bytes]]:
    """(base offset, bytes) of every batch reads hand out from ``start`` on, up to a
    hole that refuses them."""
    out: list[tuple[int, bytes]] = []
    offset = log.log_start_offset if start is None else start
    while offset < log.log_end_offset:
        try:
            read = log.read(offset, 1 << 20)
        except KafkaError as exc:
            assert exc.code == ErrorCode.KAFKA_STORAGE_ERROR
            break
        if not read.slices:
            break
        for piece in read.slices:
            data = piece.file.pread(piece.size, piece.position)
            at = 0
            while at < len(data):
                header = validate_batch(data, at)
                out.append((header.base_offset, data[at : at + header.size]))
                at += header.size
                offset = header.next_offset
    return out


def _open(directory: Path, **kwargs: object) -> Log:
    return Log.open(OsDisk(), FakeClock(), str(directory / "t-0"), "t", 0, CONFIG, **kwargs)


def _damaged(tmp_path: Path, damage) -> tuple[Log, list[tuple[int, bytes]], BatchSpan]:
    """A log of several segments, crashed; ``damage`` spoils the 5th batch of the first
    segment before it is opened again (recovery re-validates everything)."""
    log = _open(tmp_path)
    _fill(log)
    before = _served(log)
    _crash(log)
    first = _segments(tmp_path)[0]
    victim = batch_spans(first)[4]
    damage(first, victim)
    return _open(tmp_path, recovery_point=0), before, victim


def _flip_records(path: Path, span: BatchSpan) -> None:
    flip_bytes(path, span.position + HEADER_SIZE + 5, 4)


def _flip_length(path: Path, span: BatchSpan) -> None:
    flip_bytes(path, span.position + 8, 4)  # batchLength: the header no longer parses


@pytest.mark.parametrize("damage", [_flip_records, _flip_length], ids=["records", "length"])
def test_damage_extent_runs_from_the_bad_batch_to_where_good_batches_start_again(
    tmp_path: Path, damage
) -> None:
    log, before, victim = _damaged(tmp_path, damage)
    hole = log.holes.first()
    assert hole is not None and len(list(log.holes)) == 1
    assert (hole.position, hole.end_position) == (victim.position, victim.position + victim.size)
    assert (hole.first_offset, hole.end_offset) == (victim.base_offset, victim.base_offset + 2)
    assert log.log_end_offset == before[-1][0] + 2  # the log end is unchanged
    assert len(log.segments) == len(_segments(tmp_path))  # no segment went


def test_damage_to_the_end_of_a_segment_is_a_hole_up_to_the_next_segment(tmp_path: Path) -> None:
    def zero_rest(path: Path, span: BatchSpan) -> None:
        data = bytearray(path.read_bytes())
        data[span.position :] = bytes(len(data) - span.position)
        path.write_bytes(bytes(data))

    log, _, victim = _damaged(tmp_path, zero_rest)
    hole = log.holes.first()
    assert hole is not None
    assert hole.end_position == _segments(tmp_path)[0].stat().st_size
    assert (hole.first_offset, hole.end_offset) == (victim.base_offset, log.segments[1].base_offset)


def test_damage_in_the_last_segment_with_nothing_good_after_it_still_cuts(tmp_path: Path) -> None:
    log = _open(tmp_path)
    _fill(log)
    _crash(log)
    last = _segments(tmp_path)[-1]
    victim = batch_spans(last)[-1]
    _flip_records(last, victim)
    log = _open(tmp_path, recovery_point=0)
    assert not log.holes and log.log_end_offset == victim.base_offset


def test_quarantine_keeps_only_the_damaged_bytes(tmp_path: Path) -> None:
    log, _, victim = _damaged(tmp_path, _flip_records)
    damaged = _segments(tmp_path)[0].read_bytes()[victim.position : victim.position + victim.size]
    entries = log.quarantine.list()
    assert len(entries) == 1 and entries[0]["hole"] is True
    assert (entries[0]["first_offset"], entries[0]["last_offset"]) == (
        victim.base_offset,
        victim.base_offset + 1,
    )
    assert Path(entries[0]["file"]).read_bytes() == damaged
    assert entries[0]["size"] == victim.size and "CRC" in entries[0]["reason"]


def test_a_hole_is_never_served(tmp_path: Path) -> None:
    log, before, victim = _damaged(tmp_path, _flip_records)
    hole = log.holes.first()
    assert hole is not None
    served = _served(log)
    # Reads stop before the hole: everything before it, nothing from it on; one that
    # starts inside it is refused (a client retries, and finds another replica).
    assert served == [b for b in before if b[0] < hole.first_offset]
    for offset in (hole.first_offset, hole.first_offset + 1):
        with pytest.raises(KafkaError) as refused:
            log.read(offset, 1 << 20)
        assert refused.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    whole = log.read(0, 1 << 30)
    assert all(s.position + s.size <= hole.position for s in whole.slices)
    # Past it, reads go on (the offsets there are whole and checked).
    after = _served(log, hole.end_offset)
    assert after[0][0] == hole.end_offset and after == [
        b for b in before if b[0] >= hole.end_offset
    ]


def test_a_lost_hole_is_stepped_over_and_its_offsets_never_given_out_again(
    tmp_path: Path,
) -> None:
    log, before, victim = _damaged(tmp_path, _flip_records)
    log.holes.declare_lost("the only copy")
    # A reader sees a gap in offsets, as after compaction: every other batch is served.
    assert _served(log) == [b for b in before if b[0] != victim.base_offset]
    assert _served(log, victim.base_offset)[0][0] == victim.base_offset + 2
    assert log.append_as_leader(batch(1), 3).base_offset == before[-1][0] + 2


def test_repair_writes_the_replicas_bytes_in_place_and_clears_the_hole(tmp_path: Path) -> None:
    log, before, victim = _damaged(tmp_path, _flip_records)
    epochs = log.epoch_cache.entries()
    hole = log.holes.first()
    assert hole is not None
    copy = dict(before)[victim.base_offset]
    assert log.fill_hole(hole, copy + b"more bytes the leader sent after it") is True
    assert not log.holes
    assert (
        _segments(tmp_path)[0].read_bytes()[victim.position : victim.position + victim.size] == copy
    )
    assert _served(log) == before
    assert log.epoch_cache.entries() == epochs
    assert log.segments[0].find_batch(victim.base_offset + 1)[0] == victim.position
    # The log goes on as if nothing had happened.
    assert log.append_as_leader(batch(1), 3).base_offset == before[-1][0] + 2


def test_a_hole_fills_from_several_answers(tmp_path: Path) -> None:
    def zero_two(path: Path, span: BatchSpan) -> None:
        data = bytearray(path.read_bytes())
        second = batch_spans(path)[5]
        data[span.position : second.position + second.size] = bytes(span.size + second.size)
        path.write_bytes(bytes(data))

    log, before, victim = _damaged(tmp_path, zero_two)
    hole = log.holes.first()
    assert hole is not None and hole.end_offset == victim.base_offset + 4
    copies = dict(before)
    assert log.fill_hole(hole, copies[victim.base_offset]) is False
    assert hole.first_offset == victim.base_offset + 2
    assert _served(log)[-1][0] == victim.base_offset  # the filled part is served
    assert log.holes.covering(victim.base_offset) is None
    assert log.fill_hole(hole, copies[victim.base_offset + 2]) is True
    assert _served(log) == before


def test_a_copy_that_does_not_fit_is_refused_and_a_truncation_ends_the_log_at_the_hole(
    tmp_path: Path,
) -> None:
    log, before, victim = _damaged(tmp_path, _flip_records)
    hole = log.holes.first()
    assert hole is not None
    copy = bytearray(dict(before)[victim.base_offset])
    longer = bytearray(build_batch([(None, bytes(41), [], 1), (None, bytes(40), [], 2)]))
    longer[:8] = copy[:8]  # same offsets, one byte longer
    other_offsets = bytearray(copy)
    other_offsets[:8] = (victim.base_offset + 1).to_bytes(8, "big")
    for wrong in (longer, other_offsets):
        with pytest.raises(RepairMismatch):
            log.fill_hole(hole, bytes(wrong))
    assert log.holes.first() is hole
    assert _segments(tmp_path)[0].read_bytes()[victim.position + 8 :][:4] == bytes(copy[8:12])
    log.truncate_to(hole.first_offset + 1, "the leader's copy differs")
    assert not log.holes and log.log_end_offset == victim.base_offset
    assert _served(log) == [b for b in before if b[0] < victim.base_offset]
    cut = [q for q in log.quarantine.list() if not q.get("hole")]
    assert len(cut) == 1 and cut[0]["first_offset"] == victim.base_offset + 2
    # The log follows its leader's from there.
    assert log.append_as_follower(batch(2, base_offset=victim.base_offset)).base_offset == (
        victim.base_offset
    )


def test_a_follower_truncating_past_a_hole_keeps_it_and_into_it_cuts_there(
    tmp_path: Path,
) -> None:
    log, _, victim = _damaged(tmp_path, _flip_records)
    hole = log.holes.first()
    log.truncate_to(victim.base_offset + 30, "diverged")
    assert log.holes.first() is hole and log.log_end_offset <= victim.base_offset + 30
    log.truncate_to(victim.base_offset + 1, "diverged")
    assert not log.holes and log.log_end_offset == victim.base_offset
    assert log.append_as_follower(batch(2, base_offset=victim.base_offset)).base_offset == (
        victim.base_offset
    )


def test_damage_a_read_finds_is_a_hole_and_the_log_end_stays(tmp_path: Path) -> None:
    log = _open(tmp_path)
    _fill(log)
    log.close()
    log = _open(tmp_path, clean_shutdown=True)
    path = _segments(tmp_path)[0]
    victim = batch_spans(path)[4]
    _flip_records(path, victim)
    _served(log)
    assert log.holes.first().first_offset == victim.base_offset
    assert log.log_end_offset == BATCHES * 2
    assert log.append_as_leader(batch(1), 3).base_offset == BATCHES * 2
    log.close()


def test_a_damaged_tail_of_unknown_extent_leaves_its_offsets_a_hole(tmp_path: Path) -> None:
    """The last batches of the log are damaged and nothing good follows: their bytes go
    to quarantine, and their offsets stay taken, a hole of missing offsets."""
    log = _open(tmp_path)
    _fill(log)
    log.close()
    log = _open(tmp_path, clean_shutdown=True)
    path = _segments(tmp_path)[-1]
    victim = batch_spans(path)[-2]
    _flip_records(path, victim)
    _flip_records(path, batch_spans(path)[-1])
    _served(log)
    hole = log.holes.first()
    assert hole is not None and hole.missing
    assert (hole.first_offset, hole.end_offset) == (victim.base_offset, BATCHES * 2)
    assert log.log_end_offset == BATCHES * 2
    assert log.append_as_leader(batch(1), 3).base_offset == BATCHES * 2
    log.close()


def test_the_cleaner_leaves_a_log_alone_from_its_first_hole_on(tmp_path: Path) -> None:
    config = LogConfig(cleanup_policy="compact", segment_bytes=2000, index_interval_bytes=100)
    manager = LogManager(OsDisk(), FakeClock(), [str(tmp_path)], config)
    manager.start(lambda _topic: config)
    log = manager.create_log("t", 0, config)
    for i in range(BATCHES):
        log.append_as_leader(bytearray(build_batch([(b"same key", b"v%d" % i, [], 1000 + i)])), 0)
    _crash(log)
    first = _segments(tmp_path)[0]
    _flip_records(first, batch_spans(first)[4])
    manager = LogManager(OsDisk(), FakeClock(), [str(tmp_path)], config)
    manager.start(lambda _topic: config)
    log = manager.get_log("t", 0)
    assert log is not None and log.holes
    segments = log.segments
    manager.high_watermark = lambda _topic, _partition: log.log_end_offset
    assert manager.clean_logs(0) == 0
    assert log.segments == segments and log.holes.first().segment is segments[0]


def test_a_hole_outlives_a_clean_shutdown(tmp_path: Path) -> None:
    """Holes live in memory: a log dir holding one is not marked shut down cleanly and
    its recovery point stays below the hole, so the next start finds it again."""
    _damaged(tmp_path, _flip_records)[0].close()  # the crash's recovery made the hole
    manager = LogManager(OsDisk(), FakeClock(), [str(tmp_path)], CONFIG)
    manager.start(lambda _topic: CONFIG)
    log = manager.get_log("t", 0)
    assert log is not None and log.holes
    first = log.holes.first().first_offset
    assert log.recovery_point <= first
    manager.close()
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    manager = LogManager(OsDisk(), FakeClock(), [str(tmp_path)], CONFIG)
    manager.start(lambda _topic: CONFIG)
    log = manager.get_log("t", 0)
    assert log is not None and log.holes.first().first_offset == first
    manager.close()


def test_the_scrubber_makes_rot_in_a_followers_sealed_segment_a_hole(tmp_path: Path) -> None:
    log = _open(tmp_path)
    _fill(log)
    before = _served(log)
    log.holes.repairable = True  # a follower's
    path = _segments(tmp_path)[1]
    victim = batch_spans(path)[2]
    _flip_records(path, victim)
    scrubber = Scrubber(FakeClock(), lambda: [log], 1000, 1 << 30)
    assert asyncio.run(scrubber.scrub_once()).damaged == 1
    hole = log.holes.first()
    assert hole is not None and hole.first_offset == victim.base_offset
    assert log.log_end_offset == before[-1][0] + 2
    assert asyncio.run(scrubber.scrub_once()).damaged == 0  # it steps over the hole
    assert log.fill_hole(hole, dict(before)[victim.base_offset])
    assert asyncio.run(scrubber.scrub_once()).damaged == 0
    assert _served(log) == before


def test_two_damaged_batches_are_two_holes_filled_one_after_the_other(tmp_path: Path) -> None:
    def two(path: Path, span: BatchSpan) -> None:
        _flip_records(path, span)
        _flip_records(_segments(tmp_path)[1], batch_spans(_segments(tmp_path)[1])[1])

    log, before, victim = _damaged(tmp_path, two)
    holes = list(log.holes)
    assert len(holes) == 2 and holes[0].first_offset == victim.base_offset
    assert holes[1].segment is log.segments[1]
    copies = dict(before)
    for hole in holes:
        assert log.fill_hole(hole, copies[hole.first_offset])
    assert not log.holes and _served(log) == before
