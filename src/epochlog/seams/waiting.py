"""Bounded waits on the Clock seam (never the event loop's own clock: ``asyncio.wait_for``,
``asyncio.timeout`` and ``call_later`` would time out in real time under a simulation)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import Any, TypeVar

from epochlog.seams import Clock

T = TypeVar("T")


async def finished_within(clock: Clock, awaitable: Awaitable[object], seconds: float) -> bool:
    """Whether ``awaitable`` finishes within ``seconds`` on ``clock``; it is left running
    either way (the caller decides what to do with it)."""
    target = asyncio.ensure_future(awaitable)
    if target.done() or seconds <= 0:
        return target.done()
    with contextlib.suppress(TimeoutError):
        async with clock.timeout(seconds):
            await asyncio.wait({target})
    return target.done()


async def first_finished_within(
    clock: Clock, futures: list[asyncio.Future[Any]], seconds: float
) -> None:
    """Return once any of ``futures`` is done or ``seconds`` passed on ``clock``; none
    is cancelled."""
    if not futures or seconds <= 0 or any(f.done() for f in futures):
        return
    with contextlib.suppress(TimeoutError):
        async with clock.timeout(seconds):
            await asyncio.wait(futures, return_when=asyncio.FIRST_COMPLETED)


async def with_timeout(clock: Clock, awaitable: Awaitable[T], seconds: float) -> T:
    """``awaitable``'s result, or TimeoutError after ``seconds`` on ``clock`` (it is then
    cancelled)."""
    async with clock.timeout(max(0.0, seconds)):
        return await awaitable


async def wait_event(clock: Clock, event: asyncio.Event, seconds: float) -> bool:
    """Wait until ``event`` is set or ``seconds`` pass; True if it was set. Set counts
    even if another task cleared it again before this one resumed (a producer's idle
    event, cleared by the next record: a flush that saw it set had its records answered)."""
    if event.is_set():
        return True
    with contextlib.suppress(TimeoutError):
        async with clock.timeout(max(0.0, seconds)):
            await event.wait()
            return True
    return event.is_set()


class Signal:
    """A broadcast wake-up: every waiter registered before ``fire`` returns, woken in
    the order they came (a set's order would vary from run to run)."""

    def __init__(self) -> None:
        self._waiters: dict[asyncio.Future[None], None] = {}

    def fire(self) -> None:
        waiters, self._waiters = self._waiters, {}
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def wait(self, clock: Clock, timeout_s: float) -> None:
        """Return at the next ``fire`` or after ``timeout_s``."""
        if timeout_s <= 0:
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters[waiter] = None
        try:
            await finished_within(clock, waiter, timeout_s)
        finally:
            self._waiters.pop(waiter, None)
            if not waiter.done():
                waiter.cancel()
