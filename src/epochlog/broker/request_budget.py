"""``queued.max.request.bytes``: the request bytes all connections together may hold,
shared out so that no connection can hold it hostage.

Kafka reserves a frame's announced size from one memory pool and mutes a connection
whose frame does not fit: three connections that each announce a third of the pool and
send nothing more starve every other client. Here each connection (one frame at a time)
reserves its frame's size before reading it, as Kafka's, but large frames together may
hold only three quarters of the budget and one of them half, so small requests (an
ApiVersions, a Metadata, a heartbeat or a commit) are admitted at once while large ones
wait their turn, and no one connection holds what all large ones may. A frame that
stops arriving closes its connection (``idle_connections``), which gives its share
back; its buffer grows only as its bytes arrive (``seams.socket_stream``)."""

from __future__ import annotations

import asyncio
from collections import deque

# Frames up to this size are admitted whenever the whole budget has room for them.
SMALL_REQUEST_BYTES = 64 << 10


class RequestBytesBudget:
    """Reservations of whole frames: a small one is admitted as soon as it fits, a large
    one when it fits and no large one that asked before it still waits."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        # The largest frame one connection may hold: a larger one is refused unread.
        self.share = limit // 2
        # What frames above SMALL_REQUEST_BYTES may hold together.
        self.large_limit = limit * 3 // 4
        self.used = 0
        self.large = 0
        self._waiting: deque[tuple[int, asyncio.Future[None]]] = deque()

    async def acquire(self, size: int) -> None:
        """Reserve ``size`` bytes (at most ``share``), waiting until they fit."""
        assert 0 <= size <= self.share, f"a {size}-byte frame exceeds the share"
        if self._fits(size) and not (size > SMALL_REQUEST_BYTES and self._large_waiting()):
            self._take(size)
            return
        entry = (size, asyncio.get_running_loop().create_future())
        self._waiting.append(entry)
        try:
            await entry[1]
        except asyncio.CancelledError:
            if entry[1].done() and not entry[1].cancelled():
                self.release(size)  # admitted as its connection was closed
            else:
                self._waiting.remove(entry)
                self._admit()  # a large frame that waited may have held smaller ones back
            raise

    def release(self, size: int) -> None:
        self.used -= size
        if size > SMALL_REQUEST_BYTES:
            self.large -= size
        self._admit()

    def _fits(self, size: int) -> bool:
        if self.used + size > self.limit:
            return False
        return size <= SMALL_REQUEST_BYTES or self.large + size <= self.large_limit

    def _take(self, size: int) -> None:
        self.used += size
        if size > SMALL_REQUEST_BYTES:
            self.large += size

    def _large_waiting(self) -> bool:
        return any(size > SMALL_REQUEST_BYTES for size, _ in self._waiting)

    def _admit(self) -> None:
        """Admit the waiters that now fit: small ones in any order, large ones in the
        order they asked (a stream of medium frames never starves a big one)."""
        large_blocked = False
        for entry in list(self._waiting):
            size, admitted = entry
            large = size > SMALL_REQUEST_BYTES
            if admitted.cancelled() or (large and large_blocked):
                continue  # a cancelled one leaves the queue itself
            if self._fits(size):
                self._waiting.remove(entry)
                self._take(size)
                admitted.set_result(None)
            elif large:
                large_blocked = True
