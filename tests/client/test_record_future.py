"""AsyncProducer.send's futures (record_future): asyncio takes them as its own futures
(await, gather, wait, wait_for, shield, Tasks), callbacks run once each in record order
and see a future equal to the one send returned, cancelling stops only the waiting, and
a pending record keeps no object of its own alive for the cyclic collector to walk,
and a loop of sends lets the loop run as its batches grow."""

from __future__ import annotations

import asyncio
import gc
import types
from pathlib import Path
from typing import Any

import pytest
from inprocess_broker import run, running_broker

from epochlog.client import AsyncProducer
from epochlog.client.admin import AsyncAdmin
from epochlog.client.last_batch import TURN_BYTES
from epochlog.client.produce_batch import RECORD_OVERHEAD, _Batch
from epochlog.client.record_future import HeldRecord, RecordFuture, RecordOutcomes


def answered_later(outcomes: RecordOutcomes[str], delay: float = 0.01) -> None:
    asyncio.get_running_loop().call_later(delay, outcomes.settle, None, lambda p: f"r{p}")


def test_asyncio_takes_a_record_future_as_a_future() -> None:
    async def scenario() -> None:
        outcomes: RecordOutcomes[str] = RecordOutcomes(asyncio.get_running_loop())
        futures = [outcomes.future(p) for p in range(3)]
        assert all(asyncio.isfuture(f) and not f.done() for f in futures)
        with pytest.raises(asyncio.InvalidStateError):
            futures[0].result()
        answered_later(outcomes)
        assert await futures[0] == "r0"
        assert await asyncio.gather(*futures) == ["r0", "r1", "r2"]
        done, pending = await asyncio.wait(futures)
        assert done == set(futures) and not pending
        assert await asyncio.wait_for(futures[1], 1) == "r1"
        assert await asyncio.shield(futures[2]) == "r2"
        assert await asyncio.create_task(_await(futures[2])) == "r2"
        # as_completed finds each answered future in its set by the view it is given
        assert sorted([await f for f in asyncio.as_completed(futures)]) == ["r0", "r1", "r2"]
        more = RecordOutcomes[str](asyncio.get_running_loop())
        answered_later(more)
        pending = [more.future(p) for p in range(3)]
        assert sorted([await f for f in asyncio.as_completed(pending)]) == ["r0", "r1", "r2"]

    run(scenario)


async def _await(future: Any) -> Any:
    return await future


def test_a_record_future_equals_only_a_future_of_the_same_record() -> None:
    async def scenario() -> None:
        outcomes: RecordOutcomes[str] = RecordOutcomes(asyncio.get_running_loop())
        other: RecordOutcomes[str] = RecordOutcomes(asyncio.get_running_loop())
        first = outcomes.future(0)
        same = outcomes.future(0)
        assert (first == same, first != same) == (True, False)
        assert hash(first) == hash(outcomes.future(0))
        for different in (outcomes.future(1), other.future(0), (outcomes, 0), 0):
            assert (first == different, first != different) == (False, True), different

    run(scenario)


def test_an_error_reaches_every_record_and_every_way_of_waiting() -> None:
    async def scenario() -> None:
        outcomes: RecordOutcomes[str] = RecordOutcomes(asyncio.get_running_loop())
        futures = [outcomes.future(p) for p in range(2)]
        seen: list[BaseException | None] = []
        futures[1].add_done_callback(lambda f: seen.append(f.exception()))
        error = RuntimeError("not delivered")
        outcomes.settle(error, None)
        with pytest.raises(RuntimeError, match="not delivered"):
            await futures[0]
        results = await asyncio.gather(*futures, return_exceptions=True)
        assert results == [error, error] and seen == [error]

    run(scenario)


def test_callbacks_run_once_in_record_order_with_a_future_equal_to_sends() -> None:
    async def scenario() -> None:
        outcomes: RecordOutcomes[str] = RecordOutcomes(asyncio.get_running_loop())
        futures = [outcomes.future(p) for p in range(5)]
        calls: list[tuple[int, Any]] = []
        for p in (3, 0, 4, 1):
            futures[p].add_done_callback(lambda f, p=p: calls.append((p, f)))
        futures[0].add_done_callback(lambda f: calls.append((-1, f)))
        outcomes.settle(None, lambda p: f"r{p}")
        assert calls == []  # from the loop, as asyncio.Future's, not from settle
        await asyncio.sleep(0)
        assert [p for p, _ in calls] == [3, 0, 4, 1, -1]
        for p, f in calls:
            assert f == futures[max(p, 0)] and hash(f) == hash(futures[max(p, 0)])
            assert f.result() == f"r{max(p, 0)}"
        assert futures[0] != futures[1]
        late: list[Any] = []
        futures[2].add_done_callback(late.append)  # already done: still called soon
        await asyncio.sleep(0)
        assert late == [futures[2]] and len(calls) == 5

    run(scenario)


def test_a_callback_that_raises_goes_to_the_loops_handler_and_the_rest_still_run() -> None:
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        reported: list[dict[str, Any]] = []
        loop.set_exception_handler(lambda _loop, context: reported.append(context))
        outcomes: RecordOutcomes[str] = RecordOutcomes(loop)
        ran: list[int] = []

        def broken(_f: Any) -> None:
            raise ValueError("a caller's bug")

        outcomes.future(0).add_done_callback(broken)
        outcomes.future(1).add_done_callback(lambda f: ran.append(1))
        outcomes.settle(None, lambda p: p)
        await asyncio.sleep(0)
        assert ran == [1]
        assert [type(c["exception"]) for c in reported] == [ValueError]
        assert reported[0]["future"] == outcomes.future(0)

    run(scenario)


def test_cancelling_stops_only_that_records_waiting() -> None:
    async def scenario() -> None:
        outcomes: RecordOutcomes[str] = RecordOutcomes(asyncio.get_running_loop())
        cancelled, kept = outcomes.future(0), outcomes.future(1)
        seen: list[str] = []
        cancelled.add_done_callback(lambda f: seen.append("cancelled" if f.cancelled() else "?"))
        kept.add_done_callback(lambda f: seen.append(f.result()))
        assert cancelled.cancel() and cancelled.done() and cancelled.cancelled()
        assert not cancelled.cancel()
        with pytest.raises(asyncio.CancelledError):
            cancelled.result()
        await asyncio.sleep(0)
        assert seen == ["cancelled"]
        outcomes.settle(None, lambda p: f"r{p}")
        await asyncio.sleep(0)
        assert seen == ["cancelled", "r1"] and cancelled.cancelled()
        assert not kept.cancel()

    run(scenario)


def test_a_task_awaiting_a_record_is_cancelled_with_it() -> None:
    """The Task's wakeup (added with its context) is taken back and run at once, so the
    Task ends cancelled, and so does another awaiting the same record (as with one
    shared asyncio.Future); a Task awaiting another record still gets its answer."""

    async def scenario() -> None:
        outcomes: RecordOutcomes[str] = RecordOutcomes(asyncio.get_running_loop())
        cancelled = asyncio.create_task(_await(outcomes.future(0)))
        same_record = asyncio.create_task(_await(outcomes.future(0)))
        other_record = asyncio.create_task(_await(outcomes.future(1)))
        await asyncio.sleep(0)
        cancelled.cancel()
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        assert outcomes.future(0).cancelled() and not other_record.done()
        with pytest.raises(asyncio.CancelledError):
            await same_record
        answered_later(outcomes)
        assert await asyncio.wait_for(other_record, 5) == "r1"

    run(scenario)


def test_wait_for_timing_out_cancels_the_future_and_takes_its_callbacks_back() -> None:
    async def scenario() -> None:
        outcomes: RecordOutcomes[str] = RecordOutcomes(asyncio.get_running_loop())
        future = outcomes.future(0)
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(future, 0.01)
        assert future.cancelled()
        other = outcomes.future(1)
        answered_later(outcomes)
        done, pending = await asyncio.wait([other], timeout=5)
        assert done == {other} and other.result() == "r1"
        calls: list[Any] = []
        last = outcomes.future(2)
        assert last.remove_done_callback(calls.append) == 0  # done: nothing to take

    run(scenario)


def test_remove_done_callback_takes_out_only_that_records_callback() -> None:
    async def scenario() -> None:
        outcomes: RecordOutcomes[str] = RecordOutcomes(asyncio.get_running_loop())
        calls: list[Any] = []
        first, second = outcomes.future(0), outcomes.future(1)
        first.add_done_callback(calls.append)
        first.add_done_callback(calls.append)
        second.add_done_callback(calls.append)
        assert first.remove_done_callback(calls.append) == 2
        assert first.remove_done_callback(calls.append) == 0
        first.add_done_callback(calls.append)  # added after a removal: found again
        first.add_done_callback(calls.extend)
        assert first.remove_done_callback(calls.extend) == 1
        outcomes.settle(None, lambda p: p)
        await asyncio.sleep(0)
        assert calls == [second, first]

    run(scenario)


def test_a_held_record_is_answered_as_a_batchs_waiter() -> None:
    async def scenario() -> None:
        held: HeldRecord[str] = HeldRecord(asyncio.get_running_loop())
        future = held.future(0)
        assert not held.done()
        held.set_result("placed")
        held.set_exception(RuntimeError("too late"))  # answered once only
        assert held.done() and await future == "placed"

    run(scenario)


def bootstrap(broker: object) -> str:
    return f"127.0.0.1:{broker.port}"  # type: ignore[attr-defined]


async def one_partition_producer(
    broker: object, batch_size: int
) -> tuple[AsyncAdmin, AsyncProducer]:
    """Topic "t" with one partition, and a producer that has sent it a first record
    (metadata known, producer id taken)."""
    admin = AsyncAdmin({"bootstrap.servers": bootstrap(broker)}, broker.seams)  # type: ignore[attr-defined]
    await admin.create_topic("t", partitions=1, replication_factor=1)
    config = {"bootstrap.servers": bootstrap(broker), "batch.size": batch_size}
    producer = AsyncProducer(config, broker.seams)  # type: ignore[attr-defined]
    await (await producer.send("t", b"first", partition=0))
    return admin, producer


def test_send_against_a_broker_pending_records_hold_no_object_each(tmp_path: Path) -> None:
    """Ten thousand records sent with a callback each, and not yet answered, add far
    fewer tracked objects than records (an asyncio.Future and the Context its callback
    copies were two a record); once
    answered, a future kept by the caller does not keep its batch's records alive."""

    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            # One batch takes them all: nothing is sent (nor made) while they are counted.
            admin, producer = await one_partition_producer(broker, batch_size=10_000_000)
            delivered: list[int] = []

            def done(future: RecordFuture[Any]) -> None:
                delivered.append(future.result().offset)

            # A batch as long goes out if the sends outlast linger.ms: its compiled encoder
            # (and numba) is loaded first, not counted.
            warm = [await producer.send("t", b"w", partition=0) for _ in range(100)]
            await asyncio.gather(*warm)
            gc.collect()
            before = len(gc.get_objects())
            for i in range(10_000):
                (await producer.send("t", b"v%d" % i, partition=0)).add_done_callback(done)
            added = len(gc.get_objects()) - before
            assert added < 1_000, added
            kept = await producer.send("t", b"kept", partition=0)
            assert await producer.flush(30)
            await asyncio.sleep(0)
            assert delivered == list(range(101, 10_101))
            assert (await kept).offset == 10_101 and isinstance(kept, RecordFuture)
            assert not reaches(kept, _Batch)
            await producer.close()
            await admin.close()

    run(scenario)


NOT_DATA = (asyncio.AbstractEventLoop, type, types.FunctionType, types.ModuleType)


def reaches(start: object, kind: type) -> bool:
    """Whether an object of ``kind`` is reachable from ``start`` through data, not through
    the loop, functions' globals or modules (which reach everything)."""
    seen, todo = {id(start)}, [start]
    while todo:
        for referent in gc.get_referents(todo.pop()):
            if isinstance(referent, kind):
                return True
            if id(referent) not in seen and not isinstance(referent, NOT_DATA):
                seen.add(id(referent))
                todo.append(referent)
    return False


def test_send_to_a_topic_without_metadata_yet_answers_through_a_held_record(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path, **{"auto.create.topics.enable": "true"}) as broker:
            producer = AsyncProducer(
                {"bootstrap.servers": bootstrap(broker), "linger.ms": 1}, broker.seams
            )
            futures = [await producer.send("new-topic", b"v%d" % i, partition=0) for i in range(3)]
            metas = await asyncio.wait_for(asyncio.gather(*futures), 30)
            assert [m.offset for m in metas] == [0, 1, 2]
            await producer.close()

    run(scenario)


def test_a_send_loop_that_never_awaits_anything_else_lets_full_batches_go(
    tmp_path: Path,
) -> None:
    """A record that finds its batch full yields to the loop once enqueued, so records
    are acknowledged while the caller goes on sending rather than piling up until it
    awaits something."""

    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            admin, producer = await one_partition_producer(broker, batch_size=2_000)
            futures = [await producer.send("t", b"v" * 100, partition=0) for _ in range(3_000)]
            assert any(f.done() for f in futures)
            assert await producer.flush(30)
            assert [f.result().offset for f in futures] == list(range(1, 3_001))
            await producer.close()
            await admin.close()

    run(scenario)


def test_a_send_loop_lets_the_loop_run_as_its_batch_grows(tmp_path: Path) -> None:
    """Between full batches too: once each ``TURN_BYTES`` a batch grows, so the sender,
    the answers and the socket are served while a loop of sends runs, not only at its
    end (a partition has one batch in flight: a batch waiting for the loop waits for
    all those behind it)."""

    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            admin, producer = await one_partition_producer(broker, batch_size=16 * 1024 * 1024)
            turns = [0]

            async def count_turns() -> None:
                while True:
                    turns[0] += 1
                    await asyncio.sleep(0)

            counter = asyncio.create_task(count_turns())
            await asyncio.sleep(0)
            turns[0] = 0
            value = b"v" * 1_000
            for _ in range(2_000):  # about 2 MB, all in one open batch
                await producer.send("t", value, partition=0)
            expected = 2_000 * (len(value) + RECORD_OVERHEAD) // TURN_BYTES
            assert expected - 1 <= turns[0] <= expected + 1
            counter.cancel()
            assert await producer.flush(30)
            await producer.close()
            await admin.close()

    run(scenario)
