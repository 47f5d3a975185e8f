"""A roll seals its segment without the fsync: that comes after, off the event loop
(a worker thread on a real disk), and the recovery point moves only once it is done,
as Kafka flushes a rolled segment from its scheduler."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from epochlog.seams.real import OsDisk, OsFile
from epochlog.storage.config import LogConfig
from epochlog.storage.log import Log
from epochlog.storage.log_manager import LogManager, LogManagerSettings

from .conftest import FakeClock, batch

SMALL_SEGMENTS = LogConfig(segment_bytes=200)


class RecordingFile(OsFile):
    def __init__(self, path: str, fsyncs: list[tuple[str, int]]) -> None:
        super().__init__(path)
        self._fsyncs = fsyncs

    def fsync(self) -> None:
        super().fsync()
        self._fsyncs.append((Path(self.path).name, threading.get_ident()))


class RecordingDisk(OsDisk):
    """The OS disk, noting each file fsync and the thread it ran on."""

    def __init__(self) -> None:
        self.fsyncs: list[tuple[str, int]] = []

    def open(self, path: str) -> OsFile:
        return RecordingFile(path, self.fsyncs)

    def synced(self, name: str) -> list[int]:
        return [thread for file, thread in self.fsyncs if file == name]


def rolled_log(tmp_path: Path) -> tuple[Log, RecordingDisk]:
    """A log whose first segment (offsets 0-1) a roll has just sealed."""
    disk = RecordingDisk()
    log = Log.open(disk, FakeClock(), str(tmp_path / "t-0"), "t", 0, SMALL_SEGMENTS)
    log.append_as_leader(batch(2, size=60), leader_epoch=0)
    log.append_as_leader(batch(2, size=60), leader_epoch=0)
    assert len(log.segments) == 2
    return log, disk


FIRST = "00000000000000000000.log"


def test_a_roll_fsyncs_its_segment_off_the_loop_and_then_moves_the_recovery_point(
    tmp_path: Path,
) -> None:
    log, disk = rolled_log(tmp_path)
    assert disk.synced(FIRST) == []
    assert log.recovery_point == 0
    asyncio.run(log.flush_rolled())
    (thread,) = disk.synced(FIRST)
    assert thread != threading.get_ident()
    assert log.recovery_point == 2
    asyncio.run(log.flush_rolled())  # nothing left: no second fsync
    assert len(disk.synced(FIRST)) == 1


def test_a_flush_covers_segments_still_waiting_for_their_roll_fsync(tmp_path: Path) -> None:
    log, disk = rolled_log(tmp_path)
    log.flush()
    assert disk.synced(FIRST) == [threading.get_ident()]
    assert log.recovery_point == log.log_end_offset == 4


def test_a_segment_cut_before_its_fsync_leaves_the_recovery_point_where_it_was(
    tmp_path: Path,
) -> None:
    log, _ = rolled_log(tmp_path)
    log.truncate_to(1)
    log.append_as_leader(batch(1, size=60), leader_epoch=0)
    asyncio.run(log.flush_rolled())
    assert log.recovery_point == 0


def test_a_segment_deleted_before_its_fsync_is_skipped_without_an_error(tmp_path: Path) -> None:
    log, disk = rolled_log(tmp_path)
    log.truncate_fully_and_start_at(10)
    asyncio.run(log.flush_rolled())
    log.flush()
    assert disk.synced(FIRST) == []
    assert log.recovery_point == 10


def test_the_log_manager_fsyncs_what_rolls_sealed_in_the_background(tmp_path: Path) -> None:
    disk = RecordingDisk()

    async def scenario() -> None:
        manager = LogManager(
            disk, FakeClock(), [str(tmp_path / "logs")], SMALL_SEGMENTS, LogManagerSettings()
        )
        manager.start()
        log = manager.create_log("t", 0)
        stop = asyncio.Event()
        background = asyncio.create_task(manager.run_background(stop))
        log.append_as_leader(batch(2, size=60), leader_epoch=0)
        log.append_as_leader(batch(2, size=60), leader_epoch=0)
        for _ in range(200):
            if log.recovery_point == 2:
                break
            await asyncio.sleep(0.01)
        stop.set()
        background.cancel()
        assert log.recovery_point == 2
        assert disk.synced(FIRST) != []
        manager.close()

    asyncio.run(scenario())


@pytest.mark.parametrize("where", ["truncate", "delete"])
def test_nothing_is_lost_by_a_clean_close_while_a_roll_fsync_waits(
    tmp_path: Path, where: str
) -> None:
    log, disk = rolled_log(tmp_path)
    if where == "delete":
        log.truncate_fully_and_start_at(10)
    log.close()
    assert disk.synced(FIRST) == ([] if where == "delete" else [threading.get_ident()])


def test_a_log_closed_while_its_roll_fsync_runs_raises_nothing(tmp_path: Path) -> None:
    """The worker's fsync meets descriptors closed under it: no error, no failed dir."""

    class ClosingDisk(RecordingDisk):
        async def off_loop(self, work: Callable[[], None]) -> None:
            log.close()
            await super().off_loop(work)

    disk = ClosingDisk()
    log = Log.open(disk, FakeClock(), str(tmp_path / "t-0"), "t", 0, SMALL_SEGMENTS)
    log.append_as_leader(batch(2, size=60), leader_epoch=0)
    log.append_as_leader(batch(2, size=60), leader_epoch=0)
    asyncio.run(log.flush_rolled())
    assert log.recovery_point == 4  # the close's own flush
