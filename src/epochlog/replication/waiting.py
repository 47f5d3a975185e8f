"""Bounded waits on the Clock seam: wait for a future or a timeout, whichever is first.

``asyncio.wait_for`` would time out on the event loop's clock; going through
``Clock.sleep`` keeps every timeout under the seam a simulation controls.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable

from epochlog.seams import Clock


async def wait_or_timeout(clock: Clock, awaitable: Awaitable[object], timeout_s: float) -> bool:
    """Wait for ``awaitable`` at most ``timeout_s``; True if it finished in time.

    The awaitable is not cancelled on timeout (the caller decides what to do with it).
    """
    target = asyncio.ensure_future(awaitable)
    if target.done():
        return True
    if timeout_s <= 0:
        return False
    sleeper = asyncio.ensure_future(clock.sleep(timeout_s))
    try:
        await asyncio.wait({target, sleeper}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        sleeper.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sleeper
    return target.done()


class Signal:
    """A broadcast wake-up: every waiter registered before ``fire`` returns."""

    def __init__(self) -> None:
        self._waiters: set[asyncio.Future[None]] = set()

    def fire(self) -> None:
        waiters, self._waiters = self._waiters, set()
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def wait(self, clock: Clock, timeout_s: float) -> None:
        """Return at the next ``fire`` or after ``timeout_s``."""
        if timeout_s <= 0:
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.add(waiter)
        try:
            await wait_or_timeout(clock, waiter, timeout_s)
        finally:
            self._waiters.discard(waiter)
            if not waiter.done():
                waiter.cancel()
