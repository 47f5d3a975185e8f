"""Virtual time for asyncio: an event loop whose clock only moves when nothing is ready
to run, straight to the next timer. Sleeps, timeouts and timers cost no real time, and
the order of events depends on nothing but the program and its seeds."""

from __future__ import annotations

import asyncio
import contextvars
import heapq
from collections.abc import Awaitable, Callable, Coroutine
from contextlib import AbstractAsyncContextManager
from typing import Any, TypeVar

T = TypeVar("T")

EPOCH_MS = 1_700_000_000_000


# The simulated host a task runs for: tasks inherit it from whoever created them, so
# everything a broker starts belongs to that broker's host (see ``run_on_host``).
HOST: contextvars.ContextVar[str | None] = contextvars.ContextVar("sim_host", default=None)

# Loop iterations at one virtual instant before the run counts as spinning: a task that
# polls the clock without ever sleeping would otherwise hold virtual time still for ever.
BUSY_LIMIT = 200_000


class SimulationStalled(RuntimeError):
    """Nothing can run and no timer is pending (every task waits for what never comes),
    or something keeps running without letting virtual time move (a busy loop)."""


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """``loop.time()`` is virtual; when no callback is ready, it jumps to the earliest
    timer. Real I/O would not be waited for, so a simulation uses the simulated seams."""

    def __init__(self) -> None:
        super().__init__()
        self._virtual_now = 0.0
        self._busy = 0
        self._tasks_of: dict[str, dict[asyncio.Task[Any], None]] = {}
        self.set_task_factory(self._new_task)  # type: ignore[arg-type]

    def _new_task(
        self, loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any], **kwargs: Any
    ) -> asyncio.Task[Any]:
        task = asyncio.Task(coro, loop=loop, **kwargs)
        context = kwargs.get("context")
        host = context.get(HOST) if context is not None else HOST.get()
        if host is not None:
            tasks = self._tasks_of.setdefault(host, {})
            tasks[task] = None
            task.add_done_callback(lambda t: tasks.pop(t, None))
        return task

    def cancel_host(self, host: str) -> int:
        """Cancel every task of ``host``, as a SIGKILL ends a process; returns how many."""
        tasks = list(self._tasks_of.pop(host, {}))
        for task in tasks:
            task.cancel()
        return len(tasks)

    def time(self) -> float:
        return self._virtual_now

    def _run_once(self) -> None:
        before = self._virtual_now
        if not self._ready and not self._stopping:  # type: ignore[attr-defined]
            scheduled = self._scheduled  # type: ignore[attr-defined]
            while scheduled and scheduled[0]._cancelled:
                self._timer_cancelled_count -= 1  # type: ignore[attr-defined]
                heapq.heappop(scheduled)._scheduled = False
            if scheduled:
                self._virtual_now = max(self._virtual_now, scheduled[0]._when)
            elif len(self._selector.get_map()) <= 1:  # only the loop's own wake-up pipe
                raise SimulationStalled(f"nothing to run at virtual time {self._virtual_now}s")
        super()._run_once()  # type: ignore[misc]
        self._busy = self._busy + 1 if self._virtual_now == before else 0
        if self._busy > BUSY_LIMIT:
            raise SimulationStalled(
                f"{BUSY_LIMIT} loop iterations at virtual time {before}s: a busy loop"
            )


class SimClock:
    """The Clock seam on a VirtualTimeLoop: wall time starts at ``start_ms``."""

    def __init__(self, loop: VirtualTimeLoop, start_ms: int = EPOCH_MS) -> None:
        self._loop = loop
        self._start_ms = start_ms

    def time_ms(self) -> int:
        return self._start_ms + round(self._loop.time() * 1000)

    def monotonic(self) -> float:
        return self._loop.time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    def timeout(self, seconds: float) -> AbstractAsyncContextManager[None]:
        return asyncio.timeout(seconds)


def run_on_host(host: str, work: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
    """Start ``work`` as a task of ``host``: it and every task it starts are that host's."""
    context = contextvars.copy_context()
    context.run(HOST.set, host)
    return asyncio.get_running_loop().create_task(work, context=context)


def run_simulated(main: Callable[[SimClock], Awaitable[T]], start_ms: int = EPOCH_MS) -> T:
    """Run ``main(clock)`` to completion on a fresh VirtualTimeLoop."""
    loop = VirtualTimeLoop()
    clock = SimClock(loop, start_ms)

    async def entry() -> T:
        return await main(clock)

    with asyncio.Runner(loop_factory=lambda: loop) as runner:
        return runner.run(entry())
