"""One idempotent epochlog producer for one Spark write task.

The asyncio ``AsyncProducer`` runs on a private event-loop thread, and a whole Arrow
batch is handed over at once, as columns: each run of rows with the same topic is one
``send_columns`` call, the Arrow buffers as they are (no Python object per record, one
future per call). Enqueueing waits while too
many records are unacknowledged, so memory stays bounded whatever the size of the
task's input."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from epochlog.client.produce_batch import SendManyResult
from epochlog.client.producer import AsyncProducer
from epochlog.protocol.column_rows import BinaryColumn
from epochlog.seams.real import real_seams

T = TypeVar("T")
# Records enqueued and not yet answered before enqueueing waits for answers.
MAX_OUTSTANDING = 200_000
# Records per send call: answers come back (and room frees) in these steps.
CHUNK = 10_000


@dataclass
class Run:
    """Consecutive rows of one topic, as columns; None for a column the input lacks."""

    topic: str
    values: BinaryColumn
    keys: BinaryColumn | None = None
    # Per row; -1 where the producer's partitioner picks.
    partitions: np.ndarray | None = None
    headers: list[list[tuple[str, bytes | None]]] | None = None

    def __len__(self) -> int:
        return len(self.values)

    def rows(self, topic: str, start: int, end: int) -> Run:
        """Rows start..end-1, for ``topic``."""
        return Run(
            topic,
            self.values.rows(start, end),
            self.keys.rows(start, end) if self.keys is not None else None,
            self.partitions[start:end] if self.partitions is not None else None,
            self.headers[start:end] if self.headers is not None else None,
        )

    def send(self, producer: AsyncProducer) -> Awaitable[SendManyResult]:
        """Enqueue these rows: as columns, or with headers (rarer) through ``send_many``
        as Python objects."""
        if self.headers is None:
            return producer.send_columns(self.topic, self.values, self.keys, self.partitions)
        n = len(self)
        partitions = None
        if self.partitions is not None:
            partitions = [None if p < 0 else p for p in self.partitions.tolist()]
        return producer.send_many(
            self.topic,
            [self.values.item(i) for i in range(n)],
            keys=[self.keys.item(i) for i in range(n)] if self.keys is not None else None,
            partition=partitions,
            headers=self.headers,
        )


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
            return AsyncProducer(config, real_seams())

        try:
            self._producer = self._run(make())
        except BaseException:
            self._stop_loop()
            raise
        self.delivery_timeout_s = self._producer.config["delivery.timeout.ms"] / 1000

    def _run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def send_runs(self, runs: Sequence[Run]) -> None:
        """Enqueue every run (in order); raises the first delivery error seen so far."""
        self._run(self._send_runs(runs))
        self.raise_if_failed()

    async def _send_runs(self, runs: Sequence[Run]) -> None:
        assert self._room is not None
        producer = self._producer
        for run in runs:
            for start in range(0, len(run), CHUNK):
                if self.first_error is not None:
                    return
                while not self._room.is_set():
                    await self._room.wait()
                result = await run.rows(run.topic, start, start + CHUNK).send(producer)
                count = len(result)
                self._outstanding += count
                self.sent += count
                result.future.add_done_callback(lambda f, n=count: self._answered(f, n))
                if self._outstanding >= self._max_outstanding:
                    self._room.clear()

    def _answered(self, future: asyncio.Future[SendManyResult], count: int) -> None:
        assert self._room is not None
        self._outstanding -= count
        error = future.exception() if not future.cancelled() else asyncio.CancelledError()
        if error is None:
            self.acknowledged += count
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
