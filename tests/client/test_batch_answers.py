"""A producer batch answers its records in their order, whoever sent them: runs of
``send``'s records, waiters of one record (the sync Producer's, a record held for its
topic's metadata), ``send_many`` calls. send()'s callbacks run from the loop, as
asyncio's do, so the others must too, each in its turn; answered at once, a
``send_many`` run was reported before the ``send`` records ahead of it (the sync
Producer's callbacks came out of order under load)."""

from __future__ import annotations

import asyncio
from collections import deque
from pathlib import Path
from typing import Any

import pytest
from inprocess_broker import run, running_broker
from test_producer_send_path import topic_and_producer

from epochlog.client.batch_fill import fill_batches
from epochlog.client.errors import DeliveryError, TopicPartition
from epochlog.client.produce_batch import SendManyResult, _Batch
from epochlog.client.record_future import HeldRecord
from epochlog.seams.real import RealClock

TP = TopicPartition("t", 0)


class Waiter:
    """A waiter of one record, as the sync Producer's DeliveryFuture is: answered at
    once when set."""

    def __init__(self, reported: list[int], index: int) -> None:
        self.reported, self.index, self.answered = reported, index, False

    def done(self) -> bool:
        return self.answered

    def set_result(self, _metadata: object) -> None:
        self.answered = True
        self.reported.append(self.index)

    def set_exception(self, _error: BaseException) -> None:
        self.set_result(None)


class MixedBatch:
    """One open batch, filled as the producer's callers would fill it."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop, self.batch = loop, _Batch(TP, 0.0)
        self.queues = {TP: deque([self.batch])}
        self.reported: list[int] = []

    def _append(self) -> int:
        self.batch.records.append(None, b"v", (), 1)  # type: ignore[union-attr]
        return len(self.batch.records) - 1

    def send(self, n: int) -> None:
        for _ in range(n):
            i = self._append()
            future = self.batch.send_outcomes(i, self.loop).future(i)
            future.add_done_callback(lambda _f, i=i: self.reported.append(i))

    def waiter(self) -> None:
        i = self._append()
        self.batch.wait(i, Waiter(self.reported, i))

    def held(self) -> None:
        i = self._append()
        held = HeldRecord[Any](self.loop)
        self.batch.wait(i, held)
        held.future(0).add_done_callback(lambda _f: self.reported.append(i))

    def send_many(self, n: int) -> None:
        result = SendManyResult(self.loop.create_future())
        result.future.add_done_callback(lambda f: f.exception())
        start = len(self.batch.records)
        fill_batches(result, self.queues, "t", [b"v"] * n, None, 0, None, None, None, 1,
                     lambda *_: 0, RealClock(), 1 << 20)  # fmt: skip
        result.on_batch = lambda _b, positions: self.reported.extend(start + p for p in positions)


@pytest.mark.parametrize("outcome", ["acknowledged", "failed"])
def test_a_batch_answers_its_records_in_order_whoever_sent_them(outcome: str) -> None:
    async def scenario() -> None:
        mixed = MixedBatch(asyncio.get_running_loop())
        mixed.send(2)
        mixed.waiter()
        mixed.send(2)
        mixed.send_many(3)
        mixed.waiter()
        mixed.held()
        mixed.send_many(2)
        mixed.send(1)
        mixed.held()
        mixed.waiter()
        batch = mixed.batch
        assert len(mixed.queues[TP]) == 1  # every record in the one batch
        if outcome == "acknowledged":
            batch.complete(100, -1)
        else:
            batch.fail(DeliveryError(TP, "expired"))
        for _ in range(10):
            await asyncio.sleep(0)
        assert mixed.reported == list(range(15))

    asyncio.run(scenario())


def test_a_send_after_a_waiter_is_answered_after_it(tmp_path: Path) -> None:
    """send()'s hot path appends to the batch it used last only while send() answers
    that batch's last record: after one with a waiter it takes the full path."""

    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            admin, producer = await topic_and_producer(broker, 1, **{"linger.ms": 200})
            reported: list[int] = []

            async def send(i: int) -> None:
                future = await producer.send("t", b"v%d" % i, partition=0)
                future.add_done_callback(lambda _f: reported.append(i))

            await send(0)
            await send(1)
            assert producer.append_now("t", b"v2", None, 0, None, None, Waiter(reported, 2))
            await send(3)
            await send(4)
            assert await producer.flush(30)
            for _ in range(10):
                await asyncio.sleep(0)
            assert reported == [0, 1, 2, 3, 4]
            await producer.close()
            await admin.close()

    run(scenario)
