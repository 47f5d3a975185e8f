"""``AsyncProducer.send``'s hot path: a record asking for the same topic and partition
as the one before goes straight to the batch that one went to, with none of the full
path's checks, so only while that is exactly where the full path would put it. Pinned
here: call order with ``send_many`` between, and with sends and ``send_many`` calls
queued to wait (never overtaken, and no batch remembered while they wait); the
partitioner asked again once a batch is sealed, after a partition count changed, and
for every record with ``partitioner=random``; a failed batch taking no more records;
the stamp each record gets at its send on either path."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

from inprocess_broker import run, running_broker

from epochlog.client import AsyncConsumer, AsyncProducer
from epochlog.client.admin import AsyncAdmin
from epochlog.client.enqueue_order import EnqueueOrder
from epochlog.client.errors import DeliveryError, TopicPartition
from epochlog.client.last_batch import LastBatch
from epochlog.client.metadata import MetadataCache, MetadataSnapshot, TopicMetadata
from epochlog.client.produce_batch import _Batch
from epochlog.protocol.errors import ErrorCode


def bootstrap(broker: Any) -> str:
    return f"127.0.0.1:{broker.port}"


async def topic_and_producer(
    broker: Any, partitions: int, **config: Any
) -> tuple[AsyncAdmin, AsyncProducer]:
    admin = AsyncAdmin({"bootstrap.servers": bootstrap(broker)}, broker.seams)
    await admin.create_topic("t", partitions=partitions, replication_factor=1)
    producer = AsyncProducer({"bootstrap.servers": bootstrap(broker), **config}, broker.seams)
    await producer.partitions_for("t")
    return admin, producer


def partitioner_asked(producer: AsyncProducer) -> list[tuple[int, int]]:
    """Each time the producer's partitioner is asked from now on: (partition count, the
    partition it chose)."""
    asked: list[tuple[int, int]] = []
    choose = producer._partitioner.partition

    def spy(topic: str, key: bytes | None, count: int) -> int:
        asked.append((count, chosen := choose(topic, key, count)))
        return chosen

    producer._partitioner.partition = spy  # type: ignore[method-assign]
    return asked


def test_a_send_after_send_many_goes_after_its_records(tmp_path: Path) -> None:
    """send_many fills the open batch and starts new ones; a small record sent next
    would still fit in the first batch, but goes after send_many's records."""

    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            admin, producer = await topic_and_producer(
                broker, 1, **{"batch.size": 1_000, "linger.ms": 50}
            )
            first = await producer.send("t", b"first", partition=0)
            many = await producer.send_many("t", [b"m" * 600] * 3, partition=0)
            last = await producer.send("t", b"z", partition=0)
            assert await producer.flush(30)
            assert (await first).offset == 0
            assert [m.offset for m in await many.future] == [1, 2, 3]
            assert (await last).offset == 4
            await producer.close()
            await admin.close()

    run(scenario)


def test_sticky_null_keys_ask_the_partitioner_again_once_a_batch_is_sealed(
    tmp_path: Path,
) -> None:
    """A full batch is sealed and sent while the next one is still open and lingering:
    the sticky partitioner moves on then, so the next record is placed by it again,
    not put in the open batch the record before went to."""

    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            admin, producer = await topic_and_producer(
                broker, 8, **{"linger.ms": 5_000, "batch.size": 1_000}
            )
            await (await producer.send("t", b"started"))  # no send waits to enqueue now
            asked = partitioner_asked(producer)
            first = [await producer.send("t", b"v" * 100) for _ in range(9)]
            # Eight fill a batch: the ninth opened a second one, in the same partition.
            assert len(asked) == 2 and asked[0][1] == asked[1][1]
            await asyncio.wait_for(asyncio.gather(*first[:8]), 10)  # the full one went
            assert not first[8].done()  # the second still lingers, open
            await producer.send("t", b"v" * 100)
            assert len(asked) == 3
            await producer.close()
            await admin.close()

    run(scenario)


def test_the_random_partitioner_picks_for_every_null_key_record(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            admin, producer = await topic_and_producer(
                broker, 4, **{"partitioner": "random", "linger.ms": 50}
            )
            futures = [await producer.send("t", b"r%d" % i) for i in range(200)]
            partitions = {m.partition for m in await asyncio.gather(*futures)}
            assert partitions == {0, 1, 2, 3}
            await producer.close()
            await admin.close()

    run(scenario)


def test_a_failed_batch_takes_no_more_records() -> None:
    batch = _Batch(TopicPartition("t", 0), 0.0)
    assert batch.open
    batch.fail(DeliveryError(TopicPartition("t", 0), "expired"))
    assert not batch.open


def test_partition_counts_follow_the_metadata_applied() -> None:
    cache = MetadataCache()

    def answer(name: str, partitions: int, error: ErrorCode = ErrorCode.NONE) -> MetadataSnapshot:
        parts = {i: object() for i in range(partitions)}
        topic = TopicMetadata(name, uuid.uuid4(), parts, error)  # type: ignore[arg-type]
        return MetadataSnapshot({}, {name: topic})

    changes: list[int] = []
    cache.on_count_change = lambda: changes.append(len(changes))
    cache.apply(answer("t", 3))
    assert cache.partition_counts == {"t": 3} and cache.partition_count("t") == 3
    cache.apply(answer("t", 3))  # the same count: nothing changed
    assert len(changes) == 1
    cache.apply(answer("t", 4))
    assert cache.partition_count("t") == 4 and len(changes) == 2
    cache.apply(answer("t", 0, ErrorCode.LEADER_NOT_AVAILABLE))  # retriable: kept
    assert cache.partition_count("t") == 4 and len(changes) == 2
    cache.apply(answer("t", 0, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
    assert cache.partition_count("t") is None and not cache.partition_counts
    assert len(changes) == 3


def test_a_queued_send_keeps_the_hot_path_closed_until_it_has_run() -> None:
    """asyncio.Lock.locked() is False between a release and the next waiter's turn; the
    count of holders and waiters is not, so no record overtakes the queued one."""

    async def scenario() -> None:
        entered: list[int] = []
        order = EnqueueOrder(lambda: entered.append(order.busy))
        ran: list[str] = []

        async def queued() -> None:
            async with order:
                ran.append("queued")

        async with order:
            task = asyncio.create_task(queued())
            await asyncio.sleep(0)
            assert order.busy == 2
        assert order.busy == 1 and ran == []  # released, the waiter not yet run
        await task
        assert order.busy == 0 and ran == ["queued"]
        assert entered == [1, 2]  # told as each queued, the holder too

    run(scenario)


def test_a_send_does_not_overtake_a_send_many_queued_before_it(tmp_path: Path) -> None:
    """A send_many waits its turn behind one that waits for a new topic's metadata;
    a send to the same partition made after it, whose batch the producer remembers
    from the record before, waits behind it too and is stored after its records."""

    async def scenario() -> None:
        async with running_broker(tmp_path, **{"auto.create.topics.enable": "true"}) as broker:
            admin, producer = await topic_and_producer(broker, 1, **{"linger.ms": 200})
            await (await producer.send("t", b"started", partition=0))
            before = await producer.send("t", b"before", partition=0)  # remembered
            new_topic = asyncio.create_task(producer.send_many("made-now", [b"n"]))
            many = asyncio.create_task(producer.send_many("t", [b"m1", b"m2"], partition=0))
            after = asyncio.create_task(producer.send("t", b"after", partition=0))
            await asyncio.sleep(0)
            assert not new_topic.done() and not many.done()  # waiting, in that order
            results = await asyncio.wait_for(asyncio.gather(new_topic, many, after), 30)
            assert await producer.flush(30)
            offsets = [m.offset for m in await results[1].future]
            assert (await before).offset < offsets[0] < offsets[1] < (await results[2]).offset
            await producer.close()
            await admin.close()

    run(scenario)


def test_records_are_stamped_with_the_wall_clock_when_sent(tmp_path: Path) -> None:
    """Both paths stamp a record at its send: the first record of a batch (full path)
    and the ones after it (straight to the open batch)."""

    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            admin, producer = await topic_and_producer(broker, 1, **{"linger.ms": 20})
            clock = broker.seams.clock
            sent = []
            for i in range(3):
                before = clock.time_ms()
                future = await producer.send("t", b"s%d" % i, partition=0)
                sent.append((before, future, clock.time_ms()))
                await asyncio.sleep(0.005)
            for before, future, after in sent:
                assert before <= (await future).timestamp <= after
            await producer.close()
            await admin.close()

    run(scenario)


def test_a_record_enqueued_while_others_queue_is_not_remembered(tmp_path: Path) -> None:
    """A send that waited its turn puts its record where it belongs, but the producer
    does not remember that batch while sends queued behind it still wait: the caller's
    next record, sent at once, must not overtake them."""

    async def scenario() -> None:
        async with running_broker(tmp_path, **{"auto.create.topics.enable": "true"}) as broker:
            admin, producer = await topic_and_producer(broker, 1, **{"linger.ms": 200})
            await (await producer.send("t", b"started", partition=0))

            async def two_sends() -> tuple[Any, Any]:
                first = await producer.send("t", b"first", partition=0)  # waits its turn
                return first, await producer.send("t", b"next", partition=0)

            new_topic = asyncio.create_task(producer.send_many("made-now", [b"n"]))
            sends = asyncio.create_task(two_sends())
            await asyncio.sleep(0)
            many = asyncio.create_task(producer.send_many("t", [b"m1", b"m2"], partition=0))
            _, (first, after), result = await asyncio.wait_for(
                asyncio.gather(new_topic, sends, many), 30
            )
            assert await producer.flush(30)
            offsets = [m.offset for m in await result.future]
            assert (await first).offset < offsets[0] < offsets[1] < (await after).offset
            await producer.close()
            await admin.close()

    run(scenario)


def test_after_a_partition_count_changes_the_next_record_is_placed_afresh(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            admin, producer = await topic_and_producer(broker, 1, **{"linger.ms": 200})
            await (await producer.send("t", b"started"))
            asked = partitioner_asked(producer)
            sent = [await producer.send("t", b"a"), await producer.send("t", b"b")]
            assert [count for count, _ in asked] == [1]  # the second went to the first's batch
            await admin.create_partitions("t", 3)
            while producer._cluster.cache.partition_count("t") != 3:  # the broker learns it
                await asyncio.sleep(0.05)
                await producer._cluster.refresh(["t"])
            sent.append(await producer.send("t", b"c"))
            assert [count for count, _ in asked] == [1, 3]
            await asyncio.wait_for(asyncio.gather(*sent), 30)
            await producer.close()
            await admin.close()

    run(scenario)


def test_a_forgotten_batch_is_let_go() -> None:
    """Forgetting happens at every seal: the sent batch must not stay alive for it."""
    last = LastBatch(16384)
    last.remember("t", 0, _Batch(TopicPartition("t", 0), 0.0))
    last.forget()
    assert (last.topic, last.batch, last.records) == (None, None, None)


def test_keys_on_the_hot_path_are_stored_as_sent_between_null_ones(tmp_path: Path) -> None:
    """The open batch keeps keys only up to the last record that has one: null keys
    before and after a key (and an empty key, which is not null) read back as sent."""

    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            admin, producer = await topic_and_producer(broker, 1, **{"linger.ms": 50})
            keys = [None, None, b"k", None, b"", None, b"last"]
            sent = [await producer.send("t", b"v", key=k, partition=0) for k in keys]
            await asyncio.wait_for(asyncio.gather(*sent), 30)
            assert len({(await f).offset - i for i, f in enumerate(sent)}) == 1  # one batch
            consumer = AsyncConsumer(
                {"bootstrap.servers": bootstrap(broker), "auto.offset.reset": "earliest"},
                broker.seams,
            )
            consumer.assign([("t", 0)])
            got: list[Any] = []
            while len(got) < len(keys):
                got.extend(await consumer.poll(200))
            assert [r.key for r in got] == keys
            await consumer.close()
            await producer.close()
            await admin.close()

    run(scenario)
