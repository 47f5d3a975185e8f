"""The disk-damage suite, on one broker's storage: each file a partition keeps (segment,
offset index, time index, leader-epoch checkpoint, producer snapshot, recovery-point
checkpoint), each damage (truncated, bytes flipped, zero-filled, garbage, deleted), after
a crash and after a clean shutdown. The log must open, serve no corrupt batch, lose only
the batches whose bytes were damaged (a hole, stepped over by reads of this only copy),
and never give out an offset twice; damage to a derived file loses nothing at all.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
from dataclasses import dataclass
from pathlib import Path

import pytest

from epochlog.protocol.batch import HEADER_SIZE, read_header, validate_batch
from epochlog.protocol.errors import KafkaError
from epochlog.protocol.records import build_batch
from epochlog.seams.real import OsDisk
from epochlog.storage.checkpoints import RECOVERY_POINT_CHECKPOINT
from epochlog.storage.config import LogConfig
from epochlog.storage.epoch_cache import CHECKPOINT_FILE
from epochlog.storage.log_manager import LogManager, LogManagerSettings
from epochlog.storage.partition_metadata import PARTITION_METADATA_FILE
from support.segments import batch_spans, flip_bytes

CONFIG = LogConfig(segment_bytes=4000, index_interval_bytes=200)
BATCHES = 60
PRODUCER_ID = 7

FILES = [
    "segment",
    "index",
    "timeindex",
    "epoch-checkpoint",
    "producer-snapshot",
    "recovery",
    "partition-metadata",
]
DAMAGES = ["truncate", "flip", "flip-record", "zero", "garbage", "delete"]


@dataclass
class Stored:
    base_offset: int
    data: bytes


def _batch(i: int) -> bytearray:
    records = [(b"k%d" % (3 * i + j), b"v" * 40, [], 1_000 + 3 * i + j) for j in range(3)]
    return bytearray(
        build_batch(records, producer_id=PRODUCER_ID, producer_epoch=0, base_sequence=3 * i)
    )


def _manager(log_dir: Path, clock) -> LogManager:
    manager = LogManager(OsDisk(), clock, [str(log_dir)], CONFIG)
    manager.start(lambda _topic: CONFIG)
    return manager


def _fill(log_dir: Path, clock, clean: bool) -> list[Stored]:
    manager = _manager(log_dir, clock)
    log = manager.create_log("t", 0, topic_id="dGhlLXRvcGljLWlkLTAwMQ")
    for i in range(BATCHES):
        log.append_as_leader(_batch(i), leader_epoch=0 if i < 20 else (1 if i < 45 else 3))
        if i == BATCHES - 10:
            log.flush()
            manager.checkpoint_recovery_points()
    stored = _read_all(manager)
    if clean:
        manager.close()
    else:
        for segment in log.segments:  # a crash: no flush, no checkpoints, no marker
            segment.close()
    return stored


def _read_all(manager: LogManager) -> list[Stored]:
    """Every batch the log serves from its start, as bytes: it is the only copy, so a
    hole is stepped over (``LogHoles.sole_copy``)."""
    log = manager.get_log("t", 0)
    assert log is not None
    log.holes.sole_copy = True
    log.holes.declare_lost("the only copy")
    out: list[Stored] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        result = log.read(offset, 1)  # one batch a read: every offset is looked up
        if not result.slices:
            break
        for piece in result.slices:
            data = piece.file.pread(piece.size, piece.position)
            pos = 0
            while pos < len(data):
                header = read_header(data, pos)
                out.append(Stored(header.base_offset, data[pos : pos + header.size]))
                pos += header.size
        offset = out[-1].base_offset + read_header(out[-1].data).last_offset_delta + 1
    return out


def _target(log_dir: Path, name: str) -> Path:
    part = log_dir / "t-0"
    segments = sorted(part.glob("*.log"))
    second = segments[1].name.removesuffix(".log")
    return {
        "segment": segments[1],
        "index": part / f"{second}.index",
        "timeindex": part / f"{second}.timeindex",
        "epoch-checkpoint": part / CHECKPOINT_FILE,
        "producer-snapshot": sorted(part.glob("*.snapshot"))[-1],
        "recovery": log_dir / RECOVERY_POINT_CHECKPOINT,
        "partition-metadata": part / PARTITION_METADATA_FILE,
    }[name]


def _damage(path: Path, how: str, rng: random.Random) -> int:
    """Damage ``path``; returns the first byte position touched."""
    size = path.stat().st_size
    middle = size // 2
    if how == "delete":
        path.unlink()
        return 0
    if how == "truncate":
        os.truncate(path, middle)
        return middle
    data = bytearray(path.read_bytes())
    if how == "flip-record" and path.suffix == ".log":
        # Inside the records of the batch holding the middle byte: only its CRC tells.
        spans = batch_spans(path)
        span = next(s for s in spans if s.position + s.size > middle)
        middle = span.position + HEADER_SIZE + 3
    if how.startswith("flip"):
        for i in range(middle, min(size, middle + 8)):
            data[i] ^= 0xFF
        path.write_bytes(bytes(data))
        return middle
    filler = bytes(size) if how == "zero" else rng.randbytes(size)
    path.write_bytes(filler)
    return 0


def _damaged_span(path: Path, how: str, touched: int) -> tuple[int, int]:
    """The byte range of a segment file the damage spoiled."""
    if how in ("flip", "flip-record"):
        return touched, touched + 8
    if how == "truncate":
        return touched, 1 << 62
    return 0, 1 << 62  # zeroed, garbage or deleted: all of it


@pytest.mark.parametrize("shutdown", ["clean", "crash"])
@pytest.mark.parametrize("how", DAMAGES)
@pytest.mark.parametrize("file", FILES)
def test_damaged_file_opens_serves_nothing_corrupt_and_loses_only_the_damaged_batches(
    tmp_path: Path, clock, file: str, how: str, shutdown: str
) -> None:
    log_dir = tmp_path / "logs"
    before = _fill(log_dir, clock, shutdown == "clean")
    target = _target(log_dir, file)
    touched = _damage(target, how, random.Random(f"{file}/{how}/{shutdown}"))
    must_keep = before
    if file == "segment":
        # Every batch whose bytes the damage did not touch stays, in every segment.
        base = int(target.name.removesuffix(".log"))
        ends = [s.base_offset for s in before if s.base_offset > base]
        next_base = min((int(p.name.removesuffix(".log")) for p in target.parent.glob("*.log")
                         if int(p.name.removesuffix(".log")) > base), default=None)  # fmt: skip
        first, last = _damaged_span(target, how, touched)
        at, spoiled = 0, set()
        for stored in before:
            if stored.base_offset < base or (
                next_base is not None and stored.base_offset >= next_base
            ):
                continue
            if at < last and at + len(stored.data) > first:
                spoiled.add(stored.base_offset)
            at += len(stored.data)
        assert ends and spoiled
        must_keep = [s for s in before if s.base_offset not in spoiled]

    manager = _manager(log_dir, clock)
    after = _read_all(manager)
    for stored in after:
        try:
            validate_batch(stored.data)
        except KafkaError as exc:
            pytest.fail(f"served a corrupt batch at offset {stored.base_offset}: {exc}")
    served = {s.base_offset: s.data for s in after}
    lost = [s.base_offset for s in must_keep if served.get(s.base_offset) != s.data]
    assert not lost, f"lost or changed batches at offsets {lost}"
    original = {s.base_offset: s.data for s in before}
    assert all(original.get(s.base_offset) == s.data for s in after)
    log = manager.get_log("t", 0)
    assert log is not None
    # No offset is given out twice: the next append goes on after every batch written.
    appended = log.append_as_leader(_batch(BATCHES), leader_epoch=3)
    assert appended.base_offset == 3 * BATCHES
    manager.close()


@pytest.mark.parametrize(
    "text",
    ["0\n2\n0 0\n3 30\n", "0\n3\n0 0\n1 63\n3 141\n", "0\n1\n5 0\n"],
    ids=["epoch-missing", "start-moved", "unknown-epoch"],
)
def test_well_formed_but_wrong_epoch_checkpoint_is_rebuilt_from_the_batches(
    tmp_path: Path, clock, caplog: pytest.LogCaptureFixture, text: str
) -> None:
    log_dir = tmp_path / "logs"
    _fill(log_dir, clock, clean=True)
    manager = _manager(log_dir, clock)
    log = manager.get_log("t", 0)
    assert log is not None
    truth = log.epoch_cache.entries()
    assert [epoch for epoch, _ in truth] == [0, 1, 3]
    manager.close()
    (log_dir / "t-0" / CHECKPOINT_FILE).write_text(text)
    with caplog.at_level(logging.WARNING, logger="epochlog.storage"):
        manager = _manager(log_dir, clock)
    log = manager.get_log("t", 0)
    assert log is not None
    assert log.epoch_cache.entries() == truth
    assert "disagrees with the batches" in caplog.text
    manager.close()


def test_scrubber_finds_bit_rot_in_a_sealed_segment_at_its_rate_and_holes_it(
    tmp_path: Path, clock
) -> None:
    """Damage after the data was already checked in this run (bits rotting on a disk)
    is found by the scrubber at log.scrub.bytes.per.second, never by luck."""
    log_dir = tmp_path / "logs"
    before = _fill(log_dir, clock, clean=True)
    manager = LogManager(
        OsDisk(),
        clock,
        [str(log_dir)],
        CONFIG,
        LogManagerSettings(scrub_interval_ms=1000, scrub_bytes_per_second=1000),
    )
    manager.start(lambda _topic: CONFIG)
    assert len(_read_all(manager)) == len(before)  # every batch checked once already
    segment = sorted((log_dir / "t-0").glob("*.log"))[2]
    span = batch_spans(segment)[3]
    flip_bytes(segment, span.position + HEADER_SIZE + 2, 2)

    stats = asyncio.run(manager.scrubber.scrub_once())
    assert stats.damaged == 1
    assert sum(clock.slept) == pytest.approx(stats.bytes_checked / 1000)
    log = manager.get_log("t", 0)
    assert log is not None and log.log_end_offset == 3 * BATCHES
    assert [s.base_offset for s in _read_all(manager)] == [
        s.base_offset for s in before if s.base_offset != span.base_offset
    ]
    (kept,) = log.quarantine.list()
    assert "scrubber" in kept["reason"] and kept["hole"]
    assert (kept["first_offset"], kept["last_offset"]) == (span.base_offset, span.base_offset + 2)
    manager.close()


def test_a_log_found_damaged_is_crc_checked_on_every_read(tmp_path: Path, clock) -> None:
    log_dir = tmp_path / "logs"
    _fill(log_dir, clock, clean=True)
    manager = _manager(log_dir, clock)
    part = log_dir / "t-0"
    segments = sorted(part.glob("*.log"))
    late = batch_spans(segments[1])[1]
    early = batch_spans(segments[0])[2]
    flip_bytes(segments[1], late.position + HEADER_SIZE + 2, 2)
    served = [s.base_offset for s in _read_all(manager)]
    assert late.base_offset not in served and served[-1] == 3 * (BATCHES - 1)
    # The earlier batch was checked already; once the log is known damaged, reads check
    # again and find rot that appears later.
    flip_bytes(segments[0], early.position + HEADER_SIZE + 2, 2)
    served = [s.base_offset for s in _read_all(manager)]
    assert early.base_offset not in served and late.base_offset not in served
    assert len(served) == BATCHES - 2
    manager.close()


def test_index_whose_last_entry_points_at_a_negative_position_is_rebuilt(
    tmp_path: Path, clock, caplog: pytest.LogCaptureFixture
) -> None:
    """Once a crash loop: startup failed with OSError from pread on every restart."""
    log_dir = tmp_path / "logs"
    before = _fill(log_dir, clock, clean=True)
    index = sorted((log_dir / "t-0").glob("*.index"))[0]
    data = bytearray(index.read_bytes())
    data[-4:] = (-5).to_bytes(4, "big", signed=True)
    index.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="epochlog.storage"):
        manager = _manager(log_dir, clock)
    assert [s.data for s in _read_all(manager)] == [s.data for s in before]
    assert "rebuilding indexes" in caplog.text
    manager.close()


@pytest.mark.parametrize("field_at", [13, 3], ids=["leader-epoch", "base-offset"])
def test_a_read_catches_rot_in_the_header_fields_the_crc_does_not_cover(
    tmp_path: Path, clock, field_at: int
) -> None:
    """Data a start did not re-validate (a clean shutdown) is checked when a read first
    reaches it: the CRC cannot see a rotted leader epoch or base offset, the batches
    around it can; the rotted batch is never served, and the rest all are."""
    log_dir = tmp_path / "logs"
    _fill(log_dir, clock, clean=True)
    manager = _manager(log_dir, clock)
    segment = sorted((log_dir / "t-0").glob("*.log"))[0]
    rotted = batch_spans(segment)[2]
    flip_bytes(segment, rotted.position + field_at, 1)
    log = manager.get_log("t", 0)
    assert log is not None
    log.read(log.log_start_offset, 1 << 20)  # a fetch's read: many batches at once
    served = [s.base_offset for s in _read_all(manager)]
    assert rotted.base_offset not in served and len(served) == BATCHES - 1
    assert all(epoch < 1000 for epoch, _ in log.epoch_cache.entries())
    manager.close()
