"""OsFile reserves blocks ahead of large appends (fallocate, size kept) and gives them
back: what is read and the size never change, and no space stays reserved once a file
is sealed, truncated or closed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from epochlog.seams import real
from epochlog.seams.real import RESERVE_AHEAD_BYTES, RESERVE_FROM_BYTES, OsFile
from epochlog.storage.config import LogConfig
from epochlog.storage.log import Log

from .conftest import FakeClock, batch

BLOCK = 4096


def allocated(path: str) -> int:
    return os.stat(path).st_blocks * 512


def blocks_for(size: int) -> int:
    return -(-size // BLOCK) * BLOCK


@pytest.fixture
def reserving(tmp_path: Path) -> Path:
    """A directory whose filesystem reserves blocks past a file's end (ext4, xfs, tmpfs)."""
    probe = OsFile(str(tmp_path / "probe"))
    probe.append(bytes(RESERVE_FROM_BYTES))
    if allocated(probe.path) <= blocks_for(RESERVE_FROM_BYTES):
        pytest.fail(f"{tmp_path}'s filesystem reserved nothing past the end: nothing to test")
    probe.close()
    return tmp_path


def test_a_large_append_reserves_blocks_past_the_end_and_keeps_size_and_bytes(
    reserving: Path,
) -> None:
    f = OsFile(str(reserving / "seg.log"))
    data = os.urandom(RESERVE_FROM_BYTES + 100)
    assert f.append(data) == 0
    assert f.size() == os.stat(f.path).st_size == len(data)
    assert allocated(f.path) >= len(data) + RESERVE_AHEAD_BYTES
    assert f.pread(len(data) + 4096, 0) == data  # nothing past the end is read
    more = os.urandom(RESERVE_FROM_BYTES)
    assert f.append(more) == len(data)  # into the reserved blocks
    assert f.pread(2 * len(data), 0) == data + more
    f.close()


def test_small_appends_reserve_nothing(tmp_path: Path) -> None:
    f = OsFile(str(tmp_path / "00.index"))
    for i in range(600):  # an index's entries: 12 bytes each
        f.append(i.to_bytes(12, "big"))
    assert allocated(f.path) <= blocks_for(f.size()) + BLOCK  # what ext4 itself may hold
    f.close()


@pytest.mark.parametrize("give_back", ["seal", "close", "truncate"])
def test_seal_close_and_truncate_give_back_what_was_reserved(
    reserving: Path, give_back: str
) -> None:
    f = OsFile(str(reserving / "seg.log"))
    data = os.urandom(3 * RESERVE_FROM_BYTES)
    f.append(data)
    assert allocated(f.path) > blocks_for(len(data))
    if give_back == "seal":
        f.seal()
        kept = len(data)
    elif give_back == "close":
        f.close()
        kept = len(data)
    else:
        f.truncate(RESERVE_FROM_BYTES)
        kept = RESERVE_FROM_BYTES
    assert allocated(f.path) <= blocks_for(kept)
    assert Path(f.path).read_bytes() == data[:kept]
    if give_back != "close":
        f.append(data)  # appends go on after a seal (a truncation into the segment)
        assert f.pread(10 * len(data), 0) == data[:kept] + data
        f.close()


def test_a_file_left_with_reserved_blocks_reopens_at_its_size(reserving: Path) -> None:
    """As after a crash: the reserved blocks past the end are never read."""
    path = str(reserving / "seg.log")
    f = OsFile(path)
    data = os.urandom(2 * RESERVE_FROM_BYTES)
    f.append(data)
    os.close(f.fileno())  # no seal, no close: what a SIGKILL leaves
    again = OsFile(path)
    assert again.size() == len(data)
    assert again.pread(RESERVE_AHEAD_BYTES, 0) == data
    again.append(data)
    assert again.pread(RESERVE_AHEAD_BYTES, 0) == data + data
    again.close()
    assert allocated(path) <= blocks_for(2 * len(data))


def test_appends_go_on_where_nothing_can_be_reserved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    refusals: list[int] = []

    def unsupported(fd: int, mode: int, offset: int, length: int) -> int:
        refusals.append(length)
        return -1  # EOPNOTSUPP

    monkeypatch.setattr(real, "_fallocate", unsupported)
    f = OsFile(str(tmp_path / "seg.log"))
    data = os.urandom(RESERVE_FROM_BYTES)
    for _ in range(3):
        f.append(data)
    assert refusals == [RESERVE_FROM_BYTES + RESERVE_AHEAD_BYTES]  # asked once only
    assert Path(f.path).read_bytes() == data * 3
    f.close()


def test_a_rolled_segment_keeps_no_reserved_blocks(reserving: Path) -> None:
    log = Log.open(
        real.OsDisk(),
        FakeClock(),
        str(reserving / "t-0"),
        "t",
        0,
        LogConfig(segment_bytes=3 * RESERVE_FROM_BYTES),
    )
    for _ in range(4):
        log.append_as_leader(batch(2, size=2 * RESERVE_FROM_BYTES // 2), leader_epoch=0)
    assert len(log.segments) >= 2
    for sealed in log.segments[:-1]:
        assert allocated(sealed.file.path) <= blocks_for(sealed.file.size())
    active = log.segments[-1].file
    assert allocated(active.path) > blocks_for(active.size())  # still reserving
    log.close()
    assert allocated(active.path) <= blocks_for(active.size())


def test_a_seal_that_cannot_give_back_only_logs(
    reserving: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A roll must not fail because reserved space could not be given back."""
    f = OsFile(str(reserving / "seg.log"))
    data = os.urandom(RESERVE_FROM_BYTES)
    f.append(data)

    def failing(fd: int, size: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(real.os, "ftruncate", failing)
    f.seal()
    assert "reserved blocks not given back" in caplog.text
    monkeypatch.undo()
    assert f.pread(2 * len(data), 0) == data
    f.close()
