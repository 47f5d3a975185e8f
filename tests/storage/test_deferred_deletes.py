"""Retention renames a deleted segment's data file ``.deleted`` at once (a restart no
longer sees a segment there) and its removal runs off the event loop; a deleted
partition's directory likewise. A restart removes what a crash left waiting."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path

from epochlog.seams.real import OsDisk
from epochlog.storage.config import LogConfig
from epochlog.storage.deferred_deletes import DeferredDeletes
from epochlog.storage.log import Log

from .conftest import FakeClock, batch

RETAINED_10S = LogConfig(segment_bytes=300, retention_ms=10_000)


def log_with_old_segments(tmp_path: Path, clock: FakeClock) -> Log:
    log = Log.open(OsDisk(), clock, str(tmp_path / "t-0"), "t", 0, RETAINED_10S)
    for _ in range(6):
        log.append_as_leader(batch(2, ts=clock.now_ms - 60_000, size=40), 0)
    assert len(log.segments) > 2
    return log


def names(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in (tmp_path / "t-0").iterdir())


def test_retention_renames_segments_aside_and_leaves_their_removal_to_later(
    tmp_path: Path,
) -> None:
    clock = FakeClock()
    log = log_with_old_segments(tmp_path, clock)
    later: list[Callable[[], None]] = []
    log.delete_later = later.append
    first = Path(log.segments[0].log_path).name
    deleted = log.delete_segments_for_retention(clock.now_ms)
    assert deleted and len(later) == deleted
    assert first + ".deleted" in names(tmp_path)
    assert first not in names(tmp_path)
    assert first.replace(".log", ".index") not in names(tmp_path)  # small: gone at once
    for removal in later:
        removal()
    assert not [n for n in names(tmp_path) if n.endswith(".deleted")]


def test_a_restart_removes_what_a_crash_left_waiting(tmp_path: Path) -> None:
    clock = FakeClock()
    log = log_with_old_segments(tmp_path, clock)
    log.delete_later = lambda _removal: None  # the broker dies before it runs
    log.delete_segments_for_retention(clock.now_ms)
    start = log.log_start_offset
    assert [n for n in names(tmp_path) if n.endswith(".deleted")]
    log.close()
    again = Log.open(OsDisk(), clock, str(tmp_path / "t-0"), "t", 0, RETAINED_10S)
    assert not [n for n in names(tmp_path) if n.endswith(".deleted")]
    assert again.segments[0].base_offset == start  # no deleted segment came back


def test_deferred_removals_run_in_order_on_a_worker_thread(tmp_path: Path) -> None:
    ran: list[tuple[str, int]] = []
    deletes = DeferredDeletes(OsDisk(), FakeClock())

    async def scenario() -> None:
        stop = asyncio.Event()
        runner = asyncio.create_task(deletes.run(stop))
        for name in ("first", "second"):
            deletes.later(lambda name=name: ran.append((name, threading.get_ident())))
        while len(ran) < 2:
            await asyncio.sleep(0.01)
        stop.set()
        runner.cancel()

    asyncio.run(scenario())
    assert [name for name, _ in ran] == ["first", "second"]
    assert all(thread != threading.get_ident() for _, thread in ran)
