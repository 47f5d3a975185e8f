"""The producer's first-come order for sends that have to wait (for the sender to
start, or for metadata): an asyncio.Lock, with a count of its holders and waiters that
``send`` reads as one attribute (``Lock.locked()`` would be a call, and it is False for
a moment after a release while the next waiter has not yet run: a record sent then
would overtake the queued ones), and ``on_enter`` called as anyone queues, so that
``send``'s hot path forgets where records went without asking a record."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from types import TracebackType


class EnqueueOrder:
    __slots__ = ("_lock", "busy", "_on_enter")

    def __init__(self, on_enter: Callable[[], object]) -> None:
        self._lock = asyncio.Lock()
        self.busy = 0  # holders and waiters: 0 means a send may go ahead at once
        self._on_enter = on_enter

    async def __aenter__(self) -> None:
        self.busy += 1
        self._on_enter()
        try:
            await self._lock.acquire()
        except BaseException:
            self.busy -= 1
            raise

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._lock.release()
        self.busy -= 1
