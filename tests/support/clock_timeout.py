"""``Clock.timeout`` for the tests' hand-driven clocks, which can only sleep."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from epochlog.seams import Clock


@contextlib.asynccontextmanager
async def sleep_timeout(clock: Clock, seconds: float) -> AsyncIterator[None]:
    """``Clock.timeout`` for a clock that can only sleep: asyncio's own timeout,
    expired when ``clock.sleep(seconds)`` returns."""
    async with asyncio.timeout(None) as deadline:
        loop = asyncio.get_running_loop()

        async def expire() -> None:
            await clock.sleep(seconds)
            deadline.reschedule(loop.time())

        watchdog = asyncio.ensure_future(expire())
        try:
            yield
        finally:
            watchdog.cancel()
