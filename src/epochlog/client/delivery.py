"""What the sync Producer hands back per record: a future with concurrent.futures'
interface (``result``, ``exception``, ``done``, ``add_done_callback``) that is cheap to
make. A ``concurrent.futures.Future`` builds a lock and a condition each, which cost
more than the rest of ``produce``; these share their producer's one condition, and
only notify it when somebody waits. The record's delivery callback runs when it is
answered, on the producer's loop thread, exactly once. (Being no Future subclass, it
does not go into ``concurrent.futures.wait``: ``Producer.flush`` waits for them all.)"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")
DeliveryCallback = Callable[[BaseException | None, Any], None]
log = logging.getLogger("epochlog.client.sync")


class Deliveries:
    """A producer's bookkeeping shared by its futures: records not answered yet
    (against ``queue.buffering.max.messages``) and threads waiting on a result."""

    def __init__(self, limit: int) -> None:
        self.lock = threading.Lock()
        self.condition = threading.Condition(self.lock)
        self.limit = limit
        # Records counted in (under the lock: by the producing threads, and by the sync
        # Producer's drain as it takes produce() records from its queue) and answered by
        # the loop thread alone (without it): answering takes no lock unless somebody
        # waits.
        self.taken = 0
        self.settled = 0
        self.waiting = 0

    @property
    def unanswered(self) -> int:
        return self.taken - self.settled

    def take_room(self, records: int) -> None:
        """Refuse records the queue has no room for, as librdkafka's QUEUE_FULL does:
        the caller flushes and tries again."""
        with self.lock:  # the condition's own lock, without its Python-level __enter__
            self.take_room_locked(records)

    def take_room_locked(self, records: int) -> None:
        """``take_room`` for a caller holding ``lock``."""
        self.check_room_locked(records)
        self.taken += records

    def check_room_locked(self, records: int, queued: int = 0) -> None:
        """BufferError unless ``records`` more fit beside ``queued`` ones not counted in
        yet (the sync Producer's queue), for a caller holding ``lock``."""
        unanswered = self.taken + queued - self.settled
        if unanswered + records > self.limit:
            raise BufferError(
                f"queue full: {unanswered} records not answered yet "
                f"(queue.buffering.max.messages={self.limit})"
            )

    def answered(self, records: int) -> None:
        """On the producer's loop thread only, where every future is answered."""
        self.settled += records
        if self.waiting:
            with self.condition:
                self.condition.notify_all()


class DeliveryFuture(Generic[T]):
    """One answer to come from the producer's loop thread (see the module's doc)."""

    __slots__ = ("_deliveries", "_records", "_on_delivery", "_done", "_value", "_error", "_then")

    def __init__(
        self,
        deliveries: Deliveries,
        records: int = 1,
        on_delivery: DeliveryCallback | None = None,
    ) -> None:
        self._deliveries = deliveries
        self._records = records
        self._on_delivery = on_delivery
        self._done = False
        self._value: T | None = None
        self._error: BaseException | None = None
        self._then: list[Callable[[DeliveryFuture[T]], None]] | None = None

    def done(self) -> bool:
        return self._done

    def cancelled(self) -> bool:
        return False

    def result(self, timeout: float | None = None) -> T:
        self._wait(timeout)
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]

    def exception(self, timeout: float | None = None) -> BaseException | None:
        self._wait(timeout)
        return self._error

    def add_done_callback(self, fn: Callable[[DeliveryFuture[T]], None]) -> None:
        if self._done:
            fn(self)
        elif self._then is None:
            self._then = [fn]
        else:
            self._then.append(fn)

    def set_result(self, value: T) -> None:
        self._settle(value, None)

    def set_exception(self, error: BaseException) -> None:
        self._settle(None, error)

    def _settle(self, value: T | None, error: BaseException | None) -> None:
        if self._done:
            return
        if self._on_delivery is not None:
            try:
                self._on_delivery(error, value)
            except Exception:  # a callback's bug must not stop other deliveries
                log.exception("on_delivery callback failed")
        self._value, self._error, self._done = value, error, True
        for fn in self._then or ():
            fn(self)
        self._deliveries.answered(self._records)

    def _wait(self, timeout: float | None) -> None:
        if self._done:
            return
        condition = self._deliveries.condition
        with condition:
            self._deliveries.waiting += 1
            try:
                if not condition.wait_for(lambda: self._done, timeout):
                    raise TimeoutError(f"no delivery report within {timeout}s")
            finally:
                self._deliveries.waiting -= 1
