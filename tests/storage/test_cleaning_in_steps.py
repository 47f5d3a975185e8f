"""The cleaner works in steps (it pauses after every batch it reads) so a pass over a
large log leaves the broker answering; a log cut, deleted or moved between two steps
stops the pass before anything is swapped: the keys it mapped may be stale."""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path

import pytest

from epochlog.seams.real import OsDisk
from epochlog.seams.tasks import Step, drain
from epochlog.storage.cleaner import LogCleaner
from epochlog.storage.log import Log
from epochlog.storage.log_manager import LogManager, LogManagerSettings

from .conftest import FakeClock
from .test_cleaner import COMPACT, keyed, latest_values


def three_segments(log: Log) -> None:
    """a=a1, b=b1 | a=a2 | z=z1 (active): a clean drops a1, superseded by a2."""
    log.append_as_leader(keyed((b"a", b"a1"), (b"b", b"b1")), leader_epoch=0)  # 0, 1
    log.roll()
    log.append_as_leader(keyed((b"a", b"a2")), leader_epoch=0)  # 2
    log.roll()
    log.append_as_leader(keyed((b"z", b"z1")), leader_epoch=0)  # 3


def steps(log: Log, clock: FakeClock) -> Generator[Step, None, object]:
    return LogCleaner(log.disk, clock).clean_steps(log, 0, log.log_end_offset, clock.now_ms)


def test_a_pass_pauses_after_every_batch_it_reads(open_log, clock) -> None:
    log = open_log(COMPACT)
    three_segments(log)
    pauses, disk_work = 0, 0
    pass_ = steps(log, clock)
    while True:
        try:
            work = next(pass_)
        except StopIteration as done:
            assert done.value is not None
            break
        if work is None:
            pauses += 1
        else:
            work()  # the cleaned file's fsync, handed out to be run off the loop
            disk_work += 1
    assert pauses == 4  # two batches mapped, then the same two rewritten
    assert disk_work == 1
    assert latest_values(log) == {b"a": b"a2", b"b": b"b1", b"z": b"z1"}


@pytest.mark.parametrize("after", [1, 3], ids=["while-mapping-keys", "while-rewriting"])
def test_a_log_cut_between_steps_keeps_the_latest_value_of_every_key(
    open_log, clock, after: int
) -> None:
    """Truncated under the pass (a follower meeting a new leader), the record that made
    a1 stale is gone: a1 must stay."""
    log = open_log(COMPACT)
    three_segments(log)
    pass_ = steps(log, clock)
    for _ in range(after):
        next(pass_)
    log.truncate_to(2)
    log.append_as_leader(keyed((b"c", b"c1")), leader_epoch=1)  # offset 2 again
    assert drain(pass_) is None
    assert latest_values(log) == {b"a": b"a1", b"b": b"b1", b"c": b"c1"}
    assert not list(Path(log.directory).glob("*.cleaned")) + list(
        Path(log.directory).glob("*.swap")
    )


def test_a_log_deleted_between_steps_ends_its_pass_quietly(tmp_path: Path) -> None:
    clock = FakeClock()
    manager = LogManager(OsDisk(), clock, [str(tmp_path)], COMPACT, LogManagerSettings())
    manager.start()
    log = manager.create_log("c", 0, COMPACT)
    three_segments(log)
    manager.high_watermark = lambda _topic, _partition: log.log_end_offset
    pass_ = manager._cleaning_pass(clock.now_ms)
    next(pass_)
    manager.delete_log("c", 0)
    assert drain(pass_) == 0
    manager.close()
