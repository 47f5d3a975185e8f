"""The producer's first-come order for sends that have to wait (for the sender to
start, or for metadata): an asyncio.Lock, with a count of its holders and waiters that
``send``'s hot path reads as one attribute. ``Lock.locked()`` would be a call a record,
and it is False for a moment after a release while the next waiter has not yet run: a
record sent then would overtake the queued ones."""

from __future__ import annotations

import asyncio
from types import TracebackType


class EnqueueOrder:
    __slots__ = ("_lock", "busy")

    def __init__(self) -> None:
        self._lock = asyncio.Lock()
        self.busy = 0  # holders and waiters: 0 means a send may go ahead at once

    async def __aenter__(self) -> None:
        self.busy += 1
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
