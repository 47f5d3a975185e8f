"""One idempotent epochlog producer for one Spark write task.

The asyncio ``AsyncProducer`` runs on a private event-loop thread, and a whole Arrow
batch of rows is enqueued by one coroutine: handing records over one at a time (as the
synchronous ``Producer`` does) costs a thread hop per record, several times slower.
Enqueueing waits while too many records are unacknowledged, so memory stays bounded
whatever the size of the task's input."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Mapping, Sequence
from typing import Any, TypeVar

from epochlog.client.producer import AsyncProducer, RecordMetadata

T = TypeVar("T")
# (topic, value, key, partition or None, headers)
Row = tuple[str, bytes | None, bytes | None, int | None, list[tuple[str, bytes | None]]]
# Records enqueued and not yet answered before enqueueing waits for answers.
MAX_OUTSTANDING = 200_000


class SinkDeliveryError(RuntimeError):
    """A record the broker did not take: the Spark task fails with the first cause."""


class TaskProducer:
    """Enqueue rows in order, ``flush`` before the task commits, ``close`` always."""

    def __init__(self, config: Mapping[str, object], max_outstanding: int = MAX_OUTSTANDING):
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="epochlog-sink-producer", daemon=True
        )
        self._thread.start()
        self._max_outstanding = max_outstanding
        self._outstanding = 0
        self.sent = 0
        self.acknowledged = 0
        self.first_error: BaseException | None = None
        self._room: asyncio.Event | None = None

        async def make() -> AsyncProducer:
            self._room = asyncio.Event()
            self._room.set()
            return AsyncProducer(config)

        try:
            self._producer = self._run(make())
        except BaseException:
            self._stop_loop()
            raise
        self.delivery_timeout_s = self._producer.config["delivery.timeout.ms"] / 1000

    def _run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def send_rows(self, rows: Sequence[Row]) -> None:
        """Enqueue every row (in order); raises the first delivery error seen so far."""
        self._run(self._send_rows(rows))
        self.raise_if_failed()

    async def _send_rows(self, rows: Sequence[Row]) -> None:
        assert self._room is not None
        producer = self._producer
        for topic, value, key, partition, headers in rows:
            if self.first_error is not None:
                return
            while not self._room.is_set():
                await self._room.wait()
            future = await producer.send(topic, value, key, partition, headers)
            self._outstanding += 1
            self.sent += 1
            future.add_done_callback(self._answered)
            if self._outstanding >= self._max_outstanding:
                self._room.clear()

    def _answered(self, future: asyncio.Future[RecordMetadata]) -> None:
        assert self._room is not None
        self._outstanding -= 1
        error = future.exception() if not future.cancelled() else asyncio.CancelledError()
        if error is None:
            self.acknowledged += 1
        elif self.first_error is None:
            self.first_error = error
        if self._outstanding <= self._max_outstanding // 2 or self.first_error is not None:
            self._room.set()

    def raise_if_failed(self) -> None:
        if self.first_error is not None:
            raise SinkDeliveryError(
                f"epochlog sink: a record was not delivered: {self.first_error}"
            ) from self.first_error

    def flush(self) -> None:
        """Wait until every enqueued record is answered; fails on any delivery error."""
        done = self._run(self._producer.flush(self.delivery_timeout_s + 30))
        self.raise_if_failed()
        if not done or self.acknowledged != self.sent:
            raise SinkDeliveryError(
                f"epochlog sink: {self.sent - self.acknowledged} of {self.sent} records "
                f"unanswered after {self.delivery_timeout_s + 30:.0f}s"
            )

    def close(self) -> None:
        try:
            self._run(self._producer.close(), self.delivery_timeout_s + 60)
        finally:
            self._stop_loop()

    def _stop_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()
