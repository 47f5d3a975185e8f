"""Background tasks a component starts and must stop, in the order they were started: a
set of tasks would be walked in the order of their addresses, which differs from run to
run, and a simulation's replay must not. And long work run in steps (``in_steps``)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Generator, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from epochlog.seams import Clock

T = TypeVar("T")

# The longest long work (a topic of thousands of partitions, a log cleaning pass) holds
# the event loop before other work gets a turn.
STEP_S = 0.02

# What long work yields: None where it may pause, or blocking disk work (an fsync of
# megabytes) to be run where it does not hold the loop before it goes on.
Step = Callable[[], None] | None


async def in_steps(
    clock: Clock,
    steps: Generator[Step, None, T],
    off_loop: Callable[[Callable[[], None]], Awaitable[None]] | None = None,
) -> T:
    """Run ``steps`` on the loop, letting other work run whenever it has held the loop
    ``STEP_S``, and the disk work it yields through ``off_loop`` (``Disk.off_loop``);
    its return value. On the simulator's clock no time passes while it runs, so it
    runs in one go there."""
    result: list[T] = []
    step_end = clock.monotonic() + STEP_S
    for work in _keeping(steps, result):
        if work is not None:
            if off_loop is None:
                work()
            else:
                await off_loop(work)
            step_end = clock.monotonic() + STEP_S
        elif clock.monotonic() >= step_end:
            await clock.sleep(0)
            step_end = clock.monotonic() + STEP_S
    return result[0]


def drain(steps: Generator[Step, None, T]) -> T:
    """Run ``steps`` to its end at once, its disk work too; its return value."""
    result: list[T] = []
    for work in _keeping(steps, result):
        if work is not None:
            work()
    return result[0]


def _keeping(steps: Generator[Step, None, T], result: list[T]) -> Generator[Step, None, None]:
    """``steps``' yields; its return value appended to ``result``."""
    result.append((yield from steps))


class BackgroundTasks:
    """Tasks that end by themselves or are cancelled together; a failure is logged to
    ``log`` (with ``what`` failed), never lost."""

    def __init__(self, log: logging.Logger | None = None, what: str = "task") -> None:
        self._tasks: dict[asyncio.Task[Any], None] = {}
        self._log = log
        self._what = what

    def spawn(self, work: Awaitable[Any]) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(work)
        self._tasks[task] = None
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.pop(task, None)
        if self._log is not None and not task.cancelled() and task.exception() is not None:
            self._log.error("%s failed", self._what, exc_info=task.exception())

    def __iter__(self) -> Iterator[asyncio.Task[Any]]:
        return iter(list(self._tasks))

    def __len__(self) -> int:
        return len(self._tasks)

    def cancel(self) -> list[asyncio.Task[Any]]:
        """Cancel every task; returns them, to be awaited."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        return tasks

    async def cancel_and_wait(self) -> None:
        for task in self.cancel():
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
