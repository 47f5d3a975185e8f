"""AsyncProducer.send_many against an in-process broker: records keep call order, keys
pick the partitions send() would, headers and timestamps arrive, acks=0 answers without
offsets, oversized records are refused before anything is enqueued, a broker refusal
fails the call's future, and a retried batch is stored once."""

from __future__ import annotations

import asyncio
import random
from collections import deque
from pathlib import Path
from typing import Any

import pytest
from inprocess_broker import run, running_broker

from epochlog.client import AsyncConsumer, AsyncProducer, DeliveryError, TopicPartition
from epochlog.client.admin import AsyncAdmin
from epochlog.client.batch_fill import fill_batches
from epochlog.client.produce_batch import SendManyResult, _Batch
from epochlog.client.producer import RecordTooLargeError
from epochlog.protocol.errors import ErrorCode


def bootstrap(broker: Any) -> str:
    return f"127.0.0.1:{broker.port}"


def producer(broker: Any, **conf: Any) -> AsyncProducer:
    return AsyncProducer(
        {"bootstrap.servers": bootstrap(broker), "retry.backoff.ms": 10, **conf}, broker.seams
    )


async def create(broker: Any, topic: str = "t", partitions: int = 1, **configs: str) -> AsyncAdmin:
    admin = AsyncAdmin({"bootstrap.servers": bootstrap(broker)}, seams=broker.seams)
    await admin.create_topic(topic, partitions=partitions, replication_factor=1, configs=configs)
    return admin


async def read_all(broker: Any, tps: list[tuple[str, int]], count: int) -> list[Any]:
    consumer = AsyncConsumer(
        {"bootstrap.servers": bootstrap(broker), "auto.offset.reset": "earliest"}, broker.seams
    )
    consumer.assign(tps)
    got: list[Any] = []
    for _ in range(300):  # hang guard
        if len(got) >= count:
            break
        got.extend(await consumer.poll(200))
    await consumer.close()
    return got


def test_send_many_keeps_order_across_batches_with_headers_and_timestamps(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            admin = await create(broker)
            p = producer(broker, **{"batch.size": 1000, "linger.ms": 5})
            n = 500  # many batches of ~1000 bytes
            values = [b"v%04d" % i + b"x" * 40 for i in range(n)]
            headers = [[("seq", b"%d" % i)] if i % 3 == 0 else None for i in range(n)]
            stamps = [1_700_000_000_000 + i for i in range(n)]
            before = await p.send("t", b"first", partition=0)
            result = await p.send_many("t", values, partition=0, headers=headers, timestamps=stamps)
            after = await p.send("t", b"last", partition=0)
            assert await result.future is result
            assert (await before).offset == 0
            assert (await after).offset == n + 1
            assert len(result) == n
            assert [m.offset for m in result] == list(range(1, n + 1))
            assert result[7].timestamp == stamps[7]
            assert result[-1].partition == 0 and result[-1].topic == "t"
            await p.close()
            await admin.close()
            got = await read_all(broker, [("t", 0)], n + 2)
            assert [r.value for r in got] == [b"first", *values, b"last"]
            assert got[1 + 3].headers == [("seq", b"3")]
            assert got[1 + 4].headers == []
            assert got[1 + 9].timestamp == stamps[9]

    run(scenario)


def test_send_many_partitions_keys_like_send(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            admin = await create(broker, "a", partitions=4)
            await admin.create_topic("b", partitions=4, replication_factor=1)
            p = producer(broker)
            keys = [b"key-%d" % i for i in range(64)]
            values = [b"value-%d" % i for i in range(64)]
            one_by_one = [await p.send("a", v, key=k) for k, v in zip(keys, values, strict=True)]
            bulk = await p.send_many("b", values, keys=keys)
            await bulk.future
            expected = [(await f).partition for f in one_by_one]
            assert [m.partition for m in bulk] == expected
            assert len(set(expected)) > 1
            # Per partition, offsets follow call order.
            for part in set(expected):
                offsets = [m.offset for m in bulk if m.partition == part]
                assert offsets == list(range(len(offsets)))
            explicit = await p.send_many("b", [b"x", b"y"], partition=[3, 1])
            await explicit.future
            assert [m.partition for m in explicit] == [3, 1]
            with pytest.raises(ValueError, match="partition 9 of b"):
                await p.send_many("b", [b"z"], partition=9)
            with pytest.raises(ValueError, match="keys has 1 items for 2 values"):
                await p.send_many("b", [b"z", b"w"], keys=[b"k"])
            empty = await p.send_many("b", [])
            assert len(await empty.future) == 0
            await p.close()
            await admin.close()
            got = await read_all(broker, [("b", i) for i in range(4)], 66)
            assert sorted(r.value for r in got) == sorted([*values, b"x", b"y"])

    run(scenario)


def test_send_many_with_acks_zero_answers_without_offsets(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            admin = await create(broker)
            p = producer(broker, acks=0, **{"enable.idempotence": False})
            result = await p.send_many("t", [b"a", b"b", b"c"], partition=0, timestamps=[5, 6, 7])
            await result.future
            assert [(m.offset, m.timestamp) for m in result] == [(-1, 5), (-1, 6), (-1, 7)]
            await p.close()
            await admin.close()
            got = await read_all(broker, [("t", 0)], 3)
            assert [(r.offset, r.value) for r in got] == [(0, b"a"), (1, b"b"), (2, b"c")]

    run(scenario)


def test_send_many_refuses_an_oversized_record_before_enqueueing_any(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            admin = await create(broker)
            p = producer(broker, **{"max.request.size": 1000})
            for keys in (None, [b"k", b"k", b"k"]):
                with pytest.raises(RecordTooLargeError, match=r"max\.request\.size \(1000\)") as e:
                    await p.send_many("t", [b"ok", b"x" * 1000, b"ok"], keys=keys, partition=0)
                assert e.value.code is ErrorCode.MESSAGE_TOO_LARGE
            with pytest.raises(RecordTooLargeError):
                await p.send_many("t", [b"ok"], partition=0, headers=[[("h", b"y" * 1000)]])
            result = await p.send_many("t", [b"fits-%d" % i for i in range(3)], partition=0)
            assert [m.offset for m in await result.future] == [0, 1, 2]
            await p.close()
            await admin.close()

    run(scenario)


def test_send_many_fails_its_future_on_a_refused_batch_and_goes_on(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            admin = await create(broker, **{"max.message.bytes": "300"})
            p = producer(broker)
            refused = await p.send_many("t", [b"z" * 400], partition=0)
            with pytest.raises(DeliveryError) as failed:
                await refused.future
            assert failed.value.code is ErrorCode.MESSAGE_TOO_LARGE
            with pytest.raises(RuntimeError, match="not acknowledged"):
                refused[0]
            later = await p.send_many("t", [b"small-1", b"small-2"], partition=0)
            assert [m.offset for m in await later.future] == [0, 1]
            await p.close()
            await admin.close()

    run(scenario)


def test_send_many_retried_batch_is_stored_once(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            admin = await create(broker)
            p = producer(broker, retries=1000, **{"retry.backoff.max.ms": 50})
            assert (await p.send_and_wait("t", b"first", partition=0)).offset == 0
            # One broker cannot meet min.insync.replicas=2: acks=all is refused, retried.
            await admin.alter_topic_configs("t", {"min.insync.replicas": "2"})
            values = [b"r%d" % i for i in range(20)]
            result = await p.send_many("t", values, partition=0)
            queue = p._queues[TopicPartition("t", 0)]
            for _ in range(6000):  # hang guard: until the batch was refused at least once
                if queue and queue[0].attempts >= 1:
                    break
                await broker.seams.clock.sleep(0.01)
            assert queue and queue[0].attempts >= 1
            await admin.alter_topic_configs("t", {"min.insync.replicas": "1"})
            assert [m.offset for m in await result.future] == list(range(1, 21))
            await p.close()
            await admin.close()
            got = await read_all(broker, [("t", 0)], 21)
            assert [(r.offset, r.value) for r in got] == list(enumerate([b"first", *values]))

    run(scenario)


def test_sync_produce_batch_keeps_order_with_produce(module_broker: Any) -> None:
    from epochlog.client import Producer
    from support.clients import create_topic

    create_topic(module_broker.bootstrap, "sync-bulk", 1)
    with Producer({"bootstrap.servers": module_broker.bootstrap}) as p:
        first = p.send("sync-bulk", b"first", partition=0)
        bulk = p.produce_batch("sync-bulk", [b"b%d" % i for i in range(100)], partition=0)
        last = p.send("sync-bulk", b"last", partition=0)
        result = bulk.result(120)
        assert [m.offset for m in result] == list(range(1, 101))
        assert first.result(120).offset == 0
        assert last.result(120).offset == 101
        too_big = p.produce_batch("sync-bulk", [b"x" * 2_000_000], partition=0)
        with pytest.raises(RecordTooLargeError):
            too_big.result(120)
        assert p.flush(120)


class StoppedClock:
    def time_ms(self) -> int:
        return 1_700_000_000_000

    def monotonic(self) -> float:
        return 0.0


@pytest.mark.parametrize("room", [300, 1000, 5000])
def test_values_to_one_partition_are_batched_as_record_by_record(room: int) -> None:
    """fill_batches' path for plain values to one partition (bisecting running sizes)
    fills the same batches, in the same order, as its record-by-record path, starting
    from a batch left open."""
    clock = StoppedClock()
    sizes = [0, 5, 70, 199, 1200, 3, 400, 250, 10_000, 1, 64]
    values = [b"x" * sizes[i % len(sizes)] for i in range(400)]

    def filled(headers: list[None] | None) -> list[list[tuple[Any, ...]]]:
        loop = asyncio.new_event_loop()
        try:
            result = SendManyResult(loop.create_future())
            queues: dict[TopicPartition, Any] = {}
            # An open batch already holding a record, as a produce() before would leave.
            queues[TopicPartition("t", 2)] = deque([_Batch(TopicPartition("t", 2), 0.0)])
            opened = queues[TopicPartition("t", 2)][0]
            opened.records.append(None, b"earlier", (), 1)
            opened.size = 27
            fill_batches(result, queues, "t", values, None, 2, None, headers, None, 3,
                         lambda *_: 2, clock, room)  # fmt: skip
            placed = zip(result._batches, result._indexes, strict=True)
            assert [b.records[i][1] for b, i in placed] == values
            assert result._pending == len(queues[TopicPartition("t", 2)])
            return [[(len(r[1]), r[3]) for r in b.records] for b in queues[TopicPartition("t", 2)]]
        finally:
            loop.close()

    # Headers given, even all None, keep the record-by-record path.
    assert filled(None) == filled([None] * len(values))


@pytest.mark.parametrize("with_keys", [False, True])
def test_records_with_chosen_partitions_are_batched_as_record_by_record(with_keys: bool) -> None:
    """fill_batches' path for records whose partitions are chosen (grouped by partition
    with numpy) fills the same batches, and tells each record where it went in call
    order, as its record-by-record path (taken when headers are given, even all None)."""
    rng = random.Random(5)
    n = 600
    values = [b"x" * rng.choice([0, 3, 90, 300, 2000]) for _ in range(n)]
    keys = [b"k%d" % i for i in range(n)] if with_keys else None
    chosen = [rng.choice([0, 1, 3]) for _ in range(n)]

    def filled(headers: list[None] | None) -> tuple[list[Any], list[Any]]:
        loop = asyncio.new_event_loop()
        try:
            result = SendManyResult(loop.create_future())
            queues: dict[TopicPartition, Any] = {}
            fill_batches(result, queues, "t", values, keys, None, chosen, headers, None, 4,
                         lambda *_: 0, StoppedClock(), 1000)  # fmt: skip
            placed = [
                (b.tp.partition, b.records[i][1], b.records[i][0])
                for b, i in zip(result._batches, result._indexes, strict=True)
            ]
            batches = [
                (tp.partition, b.size, list(b.records))
                for tp, q in sorted(queues.items(), key=lambda item: item[0].partition)
                for b in q
            ]
            assert result._pending == len(batches)
            return placed, batches
        finally:
            loop.close()

    grouped = filled(None)
    assert grouped == filled([None] * n)
    assert grouped[0] == list(zip(chosen, values, keys or [None] * n, strict=True))
    assert len(grouped[1]) > 10  # many batches per partition
