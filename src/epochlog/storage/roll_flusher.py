"""The log manager's background fsync of rolled segments (``rolled_segments.py``): a
roll only tells it which log has some, and it syncs them, one log after another, off
the event loop."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from epochlog.seams.waiting import Signal

if TYPE_CHECKING:
    from epochlog.seams import Clock
    from epochlog.storage.log import Log

logger = logging.getLogger("epochlog.storage")

# How long the flusher sleeps with nothing to do before it looks at the stop event.
_IDLE_S = 1.0


class RollFlusher:
    def __init__(self, clock: Clock, on_failure: Callable[[Log, OSError], None]) -> None:
        self._clock = clock
        self._on_failure = on_failure
        self._waiting: dict[Log, None] = {}  # in the order they rolled
        self._rolled = Signal()

    def rolled(self, log: Log) -> None:
        """``Log.on_roll``: ``log`` has segments to sync."""
        self._waiting[log] = None
        self._rolled.fire()

    async def run(self, stop_event: asyncio.Event) -> None:
        while not stop_event.is_set():
            while self._waiting:
                log = next(iter(self._waiting))
                del self._waiting[log]
                try:
                    await log.flush_rolled()
                except OSError as exc:
                    self._on_failure(log, exc)
                except Exception:
                    logger.exception("fsync of %s-%d's rolled segments", log.topic, log.partition)
            await self._rolled.wait(self._clock, _IDLE_S)
