"""Background tasks a component starts and must stop, in the order they were started: a
set of tasks would be walked in the order of their addresses, which differs from run to
run, and a simulation's replay must not."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Iterator
from typing import Any


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
