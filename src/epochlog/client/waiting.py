"""Waits bounded by the Clock seam, so timeouts follow simulated time too."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import TypeVar

from epochlog.seams import Clock

T = TypeVar("T")


async def with_timeout(clock: Clock, awaitable: Awaitable[T], seconds: float) -> T:
    """``awaitable``'s result, or TimeoutError after ``seconds`` on ``clock``."""
    task = asyncio.ensure_future(awaitable)
    timer = asyncio.ensure_future(clock.sleep(max(0.0, seconds)))
    try:
        done, _ = await asyncio.wait({task, timer}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        task.cancel()
        timer.cancel()
        raise
    if task in done:
        timer.cancel()
        return task.result()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task
    raise TimeoutError(f"no answer within {seconds:.3f}s")


async def settled_within(clock: Clock, task: asyncio.Future[T], seconds: float) -> bool:
    """Whether ``task`` is done within ``seconds`` on ``clock``; it is left running."""
    if task.done() or seconds <= 0:
        return task.done()
    timer = asyncio.ensure_future(clock.sleep(seconds))
    try:
        await asyncio.wait({task, timer}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        timer.cancel()
    return task.done()


async def wait_event(clock: Clock, event: asyncio.Event, seconds: float) -> bool:
    """Wait until ``event`` is set or ``seconds`` pass; True if it was set."""
    if event.is_set():
        return True
    try:
        await with_timeout(clock, event.wait(), seconds)
    except TimeoutError:
        return False
    return True
