"""The background scrubber (``log.scrub.interval.ms``, off by default; Ceph's and ZFS's
scrubs in spirit): every interval, the CRCs of every sealed segment are checked again
at ``log.scrub.bytes.per.second`` at most, so bits that rot on a disk are found before
a reader or a new leader needs them. Damage is handled as a read's check handles it
(``Log.damage_found``: on a follower a hole its fetcher fills from the leader, otherwise
cut and quarantined; a leader cut below its high watermark resigns)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

from epochlog.seams import Clock
from epochlog.storage.log import Log
from epochlog.storage.segment import DamagedBatch

logger = logging.getLogger("epochlog.storage")

# Bytes checked between two pauses of the event loop.
_STEP_BYTES = 1 << 20


@dataclass
class ScrubStats:
    """What one pass did."""

    segments: int = 0
    bytes_checked: int = 0
    damaged: int = 0


class Scrubber:
    def __init__(
        self,
        clock: Clock,
        logs: Callable[[], list[Log]],
        interval_ms: int,
        bytes_per_second: int,
    ) -> None:
        self.clock = clock
        self.logs = logs
        self.interval_ms = interval_ms
        self.bytes_per_second = max(1, bytes_per_second)
        self.passes: list[ScrubStats] = []

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await self.clock.sleep(self.interval_ms / 1000)
            if stop.is_set():
                return
            try:
                stats = await self.scrub_once()
            except Exception:
                logger.exception("scrub pass failed")
                continue
            self.passes.append(stats)
            logger.info(
                "scrub pass: %d sealed segments, %d bytes checked, %d damaged",
                stats.segments,
                stats.bytes_checked,
                stats.damaged,
            )

    async def scrub_once(self) -> ScrubStats:
        stats = ScrubStats()
        for log in self.logs():
            for segment in list(log.segments[:-1]):
                stats.segments += 1
                position = 0
                # The log may change while the scrubber sleeps: stop at a segment that
                # left it or became its active segment.
                while segment in log.segments[:-1] and position < segment.size:
                    try:
                        end = segment.scrub(position, _STEP_BYTES)
                    except DamagedBatch as damage:
                        stats.damaged += 1
                        log.damage_found(damage, "the scrubber's CRC check")
                        break
                    stats.bytes_checked += end - position
                    await self.clock.sleep((end - position) / self.bytes_per_second)
                    position = end
        return stats
