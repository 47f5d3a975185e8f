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
# What a drifted HostClock adds to each wait (see HostClock._virtual_s).
DRIFT_MARGIN_S = 1e-9


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
        # Paused hosts, each with the callbacks held back from it, in the order due.
        self._held: dict[str, list[asyncio.Handle]] = {}
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
        self.resume_host(host)  # a held step must run to see its cancellation
        tasks = list(self._tasks_of.pop(host, {}))
        for task in tasks:
            task.cancel()
        return len(tasks)

    def pause_host(self, host: str) -> None:
        """Stop running ``host``, as SIGSTOP does: its callbacks (task steps, timers,
        wake-ups) are held back until ``resume_host``; bytes sent to it still arrive in
        its buffers, and the rest of the world runs on."""
        self._held.setdefault(host, [])

    def resume_host(self, host: str) -> None:
        """Run ``host`` again: what it was due to do meanwhile runs now, in order."""
        self._ready.extend(self._held.pop(host, []))  # type: ignore[attr-defined]

    def time(self) -> float:
        return self._virtual_now

    def _run_once(self) -> None:
        before = self._virtual_now
        ready = self._ready  # type: ignore[attr-defined]
        while True:
            if not ready and not self._stopping:  # type: ignore[attr-defined]
                scheduled = self._scheduled  # type: ignore[attr-defined]
                while scheduled and scheduled[0]._cancelled:
                    self._timer_cancelled_count -= 1  # type: ignore[attr-defined]
                    heapq.heappop(scheduled)._scheduled = False
                if scheduled:
                    self._virtual_now = max(self._virtual_now, scheduled[0]._when)
                elif len(self._selector.get_map()) <= 1:  # only the loop's own wake-up pipe
                    raise SimulationStalled(f"nothing to run at virtual time {self._virtual_now}s")
            # Holding back a paused host's callbacks may leave nothing to run: then time
            # jumps again (the base loop would wait for real).
            if not self._held or not self._hold_paused() or ready:
                break
        super()._run_once()  # type: ignore[misc]
        self._busy = self._busy + 1 if self._virtual_now == before else 0
        if self._busy > BUSY_LIMIT:
            raise SimulationStalled(
                f"{BUSY_LIMIT} loop iterations at virtual time {before}s: a busy loop"
            )

    def _hold_paused(self) -> bool:
        """Move due timers to the ready queue (as the base loop would next) and hold
        back those of paused hosts; True if anything was held."""
        ready = self._ready  # type: ignore[attr-defined]
        scheduled = self._scheduled  # type: ignore[attr-defined]
        end = self._virtual_now + self._clock_resolution  # type: ignore[attr-defined]
        while scheduled and scheduled[0]._when < end:
            handle = heapq.heappop(scheduled)
            handle._scheduled = False
            ready.append(handle)
        held = False
        for _ in range(len(ready)):
            handle = ready.popleft()
            host = handle._context.get(HOST)
            if host in self._held:
                self._held[host].append(handle)
                held = True
            else:
                ready.append(handle)
        return held


class SimClock:
    """The Clock seam on a VirtualTimeLoop: wall time starts at ``start_ms``."""

    def __init__(self, loop: VirtualTimeLoop, start_ms: int = EPOCH_MS) -> None:
        self._loop = loop
        self._start_ms = start_ms

    def time_ms(self) -> int:
        return self._start_ms + round(self._loop.time() * 1000)

    def time_ns(self) -> int:
        return self.time_ms() * 1_000_000

    def monotonic(self) -> float:
        return self._loop.time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    def timeout(self, seconds: float) -> AbstractAsyncContextManager[None]:
        return asyncio.timeout(seconds)

    def schedule(self, seconds: float, callback: Callable[[], object]) -> asyncio.TimerHandle:
        return asyncio.get_running_loop().call_later(seconds, callback)

    def for_host(self) -> HostClock:
        """A clock of its own for one host, reading what this one does until a fault
        steps or drifts it."""
        return HostClock(self._loop, self._start_ms)


class HostClock(SimClock):
    """One host's Clock: virtual time as that host's oscillator and NTP see it. Its
    wall clock may be stepped (``step``) and its rate drift (``drift``: its seconds
    last ``1 / rate`` virtual seconds, in sleeps and timeouts too); monotonic time
    never goes backwards, whatever is done to it. Unstepped and undrifted, it reads
    exactly what the SimClock does."""

    def __init__(self, loop: VirtualTimeLoop, start_ms: int = EPOCH_MS) -> None:
        super().__init__(loop, start_ms)
        self._step_ms = 0
        self._rate = 1.0
        self._anchor_virtual = 0.0  # loop time at the last change of rate
        self._anchor_monotonic = 0.0  # what monotonic() read then

    def time_ms(self) -> int:
        return self._start_ms + self._step_ms + round(self.monotonic() * 1000)

    def monotonic(self) -> float:
        return self._anchor_monotonic + (self._loop.time() - self._anchor_virtual) * self._rate

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(self._virtual_s(seconds))

    def timeout(self, seconds: float) -> AbstractAsyncContextManager[None]:
        return asyncio.timeout(self._virtual_s(seconds))

    def schedule(self, seconds: float, callback: Callable[[], object]) -> asyncio.TimerHandle:
        return super().schedule(self._virtual_s(seconds), callback)

    def _virtual_s(self, seconds: float) -> float:
        """Virtual seconds until this clock has moved ``seconds``. Once drifted, the
        float conversion may fall short of them by a rounding error: a wait that ends
        then, with its deadline not yet reached on this clock, would be waited again
        for ever at the same instant (a long-polling fetch did so). A nanosecond more
        lets time move."""
        return seconds / self._rate + (DRIFT_MARGIN_S if self._anchor_virtual else 0.0)

    def step(self, ms: int) -> None:
        """The wall clock jumps by ``ms`` (as an NTP step does); monotonic does not."""
        self._step_ms += ms

    def drift(self, rate: float) -> None:
        """From now on this host's clock runs at ``rate`` times virtual time."""
        self._anchor_monotonic = self.monotonic()
        self._anchor_virtual = self._loop.time()
        self._rate = rate


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
