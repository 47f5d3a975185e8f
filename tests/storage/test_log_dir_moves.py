"""Several log dirs: a replica moved between them (future log, copy, swap), every state a
crash can leave a swap in settled at the next start without losing a record, and a log
dir that cannot be read taken offline while the others serve."""

from __future__ import annotations

from pathlib import Path

import pytest

from epochlog.protocol.batch import iter_batches
from epochlog.seams.real import OsDisk
from epochlog.storage.config import LogConfig
from epochlog.storage.log import Log
from epochlog.storage.log_dir_moves import carry_quarantine, copy_step, repoint_quarantine
from epochlog.storage.log_manager import LogManager, LogManagerSettings

from .conftest import FakeClock, batch


def manager(disk: OsDisk, clock: FakeClock, dirs: list[Path]) -> LogManager:
    m = LogManager(disk, clock, [str(d) for d in dirs], LogConfig(), LogManagerSettings())
    m.start()
    return m


def contents(log: Log) -> list[tuple[int, int, bytes]]:
    """(base offset, epoch, bytes) of every batch, read as a fetch would."""
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        read = log.read(offset, 1 << 20)
        for piece in read.slices:
            data = bytearray(piece.file.pread(piece.size, piece.position))
            for position, header in iter_batches(data):
                batch_bytes = bytes(data[position : position + header.size])
                out.append((header.base_offset, header.partition_leader_epoch, batch_bytes))
                offset = header.next_offset
    return out


def copy_until_caught_up(m: LogManager, current: Log, future: Log) -> None:
    for _ in range(1000):
        if copy_step(current, future, 64):
            return
    raise AssertionError("the future log never caught up")


def test_a_moved_replica_lives_in_the_new_dir_with_every_batch_and_survives_a_restart(
    disk: OsDisk, clock: FakeClock, tmp_path: Path
) -> None:
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    m = manager(disk, clock, [d1, d2])
    log = m.create_log("t", 0, topic_id="AAAAAAAAAAAAAAAAAAAAAA")
    assert m.dir_of("t", 0) == str(d1)
    for epoch in (1, 1, 2):
        log.append_as_leader(batch(3), epoch)
    before = contents(log)
    future = m.create_future_log("t", 0, str(d2))
    copy_step(log, future, 64)  # part of it, then the current log takes more appends
    log.append_as_leader(batch(2), 2)
    log.maybe_assign_epoch_start_offset(3, log.log_end_offset)  # a leadership, no batch
    copy_until_caught_up(m, log, future)
    moved = m.replace_current_with_future("t", 0)

    assert m.get_log("t", 0) is moved and m.dir_of("t", 0) == str(d2)
    moved_contents = contents(moved)
    assert moved_contents[: len(before)] == before and moved.log_end_offset == 11
    assert moved.epoch_cache.entries() == log.epoch_cache.entries() == [(1, 0), (2, 6), (3, 11)]
    assert moved.topic_id == "AAAAAAAAAAAAAAAAAAAAAA"
    assert sorted(p.name for p in d1.iterdir() if p.name.startswith("t-0")) == [
        "t-0.1700000000000-delete"
    ]
    m.close()  # a clean stop removes the replaced copy whatever its delay
    assert not [p for p in d1.iterdir() if p.name.startswith("t-0")]

    again = manager(disk, clock, [d1, d2])
    assert again.dir_of("t", 0) == str(d2) and again.future_log("t", 0) is None
    assert contents(again.get_log("t", 0)) == moved_contents
    assert "t 0 11" in (d2 / "recovery-point-offset-checkpoint").read_text()


def test_the_future_log_follows_a_truncation_and_a_new_log_start_of_the_current_one(
    disk: OsDisk, clock: FakeClock, tmp_path: Path
) -> None:
    m = manager(disk, clock, [tmp_path / "d1", tmp_path / "d2"])
    log = m.create_log("t", 0)
    for _ in range(4):
        log.append_as_leader(batch(2), 1)
    future = m.create_future_log("t", 0, str(tmp_path / "d2"))
    copy_until_caught_up(m, log, future)
    log.truncate_to(4, "a follower diverged")
    log.append_as_follower(batch(3, base_offset=4, partition_leader_epoch=2))
    log.maybe_increment_log_start_offset(3)  # DeleteRecords, inside a batch
    copy_until_caught_up(m, log, future)
    assert contents(future) == contents(log)
    assert future.log_start_offset == 3 and future.epoch_cache.entries() == [(1, 3), (2, 4)]


def test_a_copy_of_a_log_starting_inside_a_batch_starts_at_that_batch(
    disk: OsDisk, clock: FakeClock, tmp_path: Path
) -> None:
    m = manager(disk, clock, [tmp_path / "d1", tmp_path / "d2"])
    log = m.create_log("t", 0)
    for _ in range(3):
        log.append_as_leader(batch(4), 1)
    log.maybe_increment_log_start_offset(6)  # DeleteRecords: inside the batch 4..7
    future = m.create_future_log("t", 0, str(tmp_path / "d2"))
    copy_until_caught_up(m, log, future)
    assert future.log_start_offset == 6 and contents(future) == contents(log)
    assert [base for base, _, _ in contents(future)] == [4, 8]


def test_what_the_current_logs_truncations_kept_aside_moves_with_it(
    disk: OsDisk, clock: FakeClock, tmp_path: Path
) -> None:
    m = manager(disk, clock, [tmp_path / "d1", tmp_path / "d2"])
    log = m.create_log("t", 0)
    for _ in range(3):
        log.append_as_leader(batch(2), 1)
    removed = log.truncate_to(4, "a follower diverged")
    assert removed is not None
    kept = Path(removed.path).read_bytes()
    future = m.create_future_log("t", 0, str(tmp_path / "d2"))
    copy_until_caught_up(m, log, future)
    moved = m.replace_current_with_future("t", 0)
    m.close()

    (entry,) = moved.quarantine.list()
    assert entry["file"].startswith(f"{tmp_path / 'd2'}/t-0/quarantine/")
    assert Path(entry["file"]).read_bytes() == kept
    assert (entry["first_offset"], entry["reason"]) == (4, "a follower diverged")
    assert entry["moved_from"] == removed.path


def test_a_move_given_up_deletes_only_the_copy(
    disk: OsDisk, clock: FakeClock, tmp_path: Path
) -> None:
    m = manager(disk, clock, [tmp_path / "d1", tmp_path / "d2"])
    log = m.create_log("t", 0)
    log.append_as_leader(batch(2), 1)
    m.create_future_log("t", 0, str(tmp_path / "d2"))
    m.delete_future_log("t", 0)
    m.deferred_deletes.run_now()
    assert m.future_log("t", 0) is None and not list((tmp_path / "d2").glob("t-0*"))
    assert m.get_log("t", 0).log_end_offset == 2


@pytest.mark.parametrize("crash_after", ["future-created", "current-retired", "future-renamed"])
def test_a_move_interrupted_by_a_crash_is_resumed_or_finished_without_losing_a_record(
    disk: OsDisk, clock: FakeClock, tmp_path: Path, crash_after: str
) -> None:
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    m = manager(disk, clock, [d1, d2])
    log = m.create_log("t", 0)
    for _ in range(3):
        log.append_as_leader(batch(2), 1)
    log.truncate_to(4, "diverged")
    log.append_as_leader(batch(2), 2)
    expected = contents(log)
    future = m.create_future_log("t", 0, str(d2))
    copy_until_caught_up(m, log, future)
    log.flush()
    carry_quarantine(disk, log, future)
    future.flush()
    # The swap's renames, stopped where a crash would stop them (no clean shutdown).
    if crash_after != "future-created":
        disk.rename(log.directory, str(d1 / "t-0.5-retired"))
    if crash_after == "future-renamed":
        repoint_quarantine(disk, future.directory, str(d2 / "t-0"))
        disk.rename(future.directory, str(d2 / "t-0"))

    again = manager(disk, clock, [d1, d2])
    if crash_after == "future-created":  # the move resumes from the future log
        assert again.dir_of("t", 0) == str(d1)
        resumed = again.future_log("t", 0)
        assert resumed is not None and resumed[1] == str(d2)
        assert contents(resumed[0]) == expected
    else:  # the swap is finished
        assert again.dir_of("t", 0) == str(d2) and again.future_log("t", 0) is None
        assert not [p for p in d1.iterdir() if p.name.startswith("t-0")]
    assert contents(again.get_log("t", 0)) == expected
    (kept,) = again.get_log("t", 0).quarantine.list()  # never lost with the old copy
    assert kept["reason"] == "diverged" and Path(kept["file"]).exists()


def test_a_retired_copy_alone_is_put_back(disk: OsDisk, clock: FakeClock, tmp_path: Path) -> None:
    d1 = tmp_path / "d1"
    m = manager(disk, clock, [d1])
    m.create_log("t", 0).append_as_leader(batch(4), 1)
    m.close()
    disk.rename(str(d1 / "t-0"), str(d1 / "t-0.9-retired"))
    assert manager(disk, clock, [d1]).get_log("t", 0).log_end_offset == 4


def test_a_future_log_whose_current_log_is_in_an_offline_dir_waits_for_it(
    disk: OsDisk, clock: FakeClock, tmp_path: Path
) -> None:
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    m = manager(disk, clock, [d1, d2])
    log = m.create_log("t", 0)
    for _ in range(4):
        log.append_as_leader(batch(2), 1)
    future = m.create_future_log("t", 0, str(d2))
    copy_step(log, future, 64)  # a partial copy
    m.close()
    d1.rename(tmp_path / "away")
    d1.write_bytes(b"a file where a log dir should be")

    offline = manager(disk, clock, [d1, d2])
    assert offline.get_log("t", 0) is None and offline.future_log("t", 0) is None
    assert [p.name for p in d2.glob("t-0*")] == [Path(future.directory).name]  # untouched
    offline.close()

    d1.unlink()
    (tmp_path / "away").rename(d1)
    back = manager(disk, clock, [d1, d2])
    assert back.get_log("t", 0).log_end_offset == 8 and back.dir_of("t", 0) == str(d1)
    resumed = back.future_log("t", 0)
    assert resumed is not None and resumed[1] == str(d2)


def test_a_log_dir_that_cannot_be_read_is_offline_and_the_others_serve(
    disk: OsDisk, clock: FakeClock, tmp_path: Path
) -> None:
    broken = tmp_path / "broken"
    broken.write_bytes(b"not a directory")
    m = manager(disk, clock, [tmp_path / "d1", broken])
    assert m.offline_dirs == {str(broken)} and m.online_dirs == [str(tmp_path / "d1")]
    for p in range(3):
        m.create_log("t", p)
        assert m.dir_of("t", p) == str(tmp_path / "d1")
    m.close()
    with pytest.raises(OSError, match="all log dirs"):
        manager(disk, clock, [broken])
