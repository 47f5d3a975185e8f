"""Segments a roll sealed whose fsync is still to come.

A roll used to fsync the segment it sealed on the produce path: up to a segment of
data (1 GiB by default), for as long as the disk takes, with every client of the
broker waiting. Kafka flushes a rolled segment from its scheduler instead; so does
epochlog, off the event loop, and the log's recovery point moves past the segment only
once it is durable (a crash before that recovers it from the older recovery point)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from epochlog.seams import Disk
    from epochlog.storage.segment import LogSegment


@dataclass(frozen=True, eq=False)
class _Rolled:
    segment: LogSegment
    size: int  # its size when sealed: a truncation into it shows as another size
    end_offset: int


class RolledSegments:
    def __init__(self) -> None:
        self._pending: list[_Rolled] = []

    def add(self, segment: LogSegment, end_offset: int) -> None:
        self._pending.append(_Rolled(segment, segment.size, end_offset))

    def flush_now(self, live: list[LogSegment]) -> None:
        """fsync them here (a flush of the whole log, a clean shutdown), those still in
        ``live``: a deleted segment has nothing left to keep."""
        for rolled in self._pending:
            if any(s is rolled.segment for s in live):
                rolled.segment.flush()
        self._pending.clear()

    async def flush_off_loop(
        self, disk: Disk, live_segments: Callable[[], list[LogSegment]]
    ) -> int | None:
        """fsync the pending segments in the background; the offset the recovery point
        may move to, or None if one of them was cut or deleted meanwhile, or the log
        closed (its own flush covers what is left). OSError: the fsync of a segment still
        live afterwards failed (its directory is failing)."""
        pending = list(self._pending)
        if not pending:
            return None
        failures: list[tuple[LogSegment, Exception]] = []

        def sync() -> None:
            for rolled in pending:
                try:
                    rolled.segment.flush()
                except (OSError, ValueError) as exc:  # one deleted meanwhile is closed
                    failures.append((rolled.segment, exc))

        await disk.off_loop(sync)
        live = live_segments()
        self._pending = [r for r in self._pending if r not in pending]
        unchanged = all(
            any(s is r.segment for s in live) and r.segment.size == r.size for r in pending
        )
        for segment, exc in failures:
            if any(s is segment for s in live):
                raise exc
        return pending[-1].end_offset if unchanged else None
