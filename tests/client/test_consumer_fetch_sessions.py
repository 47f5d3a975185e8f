"""epochlog's consumer fetches in an incremental fetch session (KIP-227): one session
with its broker for many quiet partitions, seeks sent as changed partitions, and a lost
session answered by starting over in full, never by losing or repeating records."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from inprocess_broker import connect, run, running_broker
from kafka.protocol.consumer import FetchRequest
from test_poll_arrow import bootstrap, consumer_of

from epochlog.client import AsyncConsumer, AsyncProducer, TopicPartition
from epochlog.client.admin import AsyncAdmin

PARTITIONS = 50


async def read(
    consumer: AsyncConsumer, count: int, polls: int = 100
) -> list[tuple[int, int, bytes]]:
    got: list[tuple[int, int, bytes]] = []
    for _ in range(polls):
        got += [(r.partition, r.offset, r.value) for r in await consumer.poll(200)]
        if len(got) >= count:
            break
    return sorted(got)


async def setup(broker: Any) -> tuple[AsyncProducer, AsyncConsumer]:
    admin = AsyncAdmin({"bootstrap.servers": bootstrap(broker)}, broker.seams)
    await admin.create_topic("t", partitions=PARTITIONS, replication_factor=1)
    await admin.close()
    producer = AsyncProducer({"bootstrap.servers": bootstrap(broker)}, broker.seams)
    consumer = consumer_of(broker, **{"fetch.max.wait.ms": 100})
    consumer.assign([TopicPartition("t", p) for p in range(PARTITIONS)])
    return producer, consumer


def sessions_of_consumers(broker: Any) -> list[Any]:
    return [s for s in broker.fetch_sessions.sessions() if not s.privileged]


def test_consumer_reads_many_quiet_partitions_through_one_incremental_session(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            producer, consumer = await setup(broker)
            for partition, value in ((3, b"a"), (3, b"b"), (40, b"c")):
                await producer.send_and_wait("t", value, partition=partition)
            assert await read(consumer, 3) == [(3, 0, b"a"), (3, 1, b"b"), (40, 0, b"c")]
            await producer.send_and_wait("t", b"d", partition=17)
            assert await read(consumer, 1) == [(17, 0, b"d")]
            (session,) = sessions_of_consumers(broker)
            assert len(session.partitions) == PARTITIONS and session.uses_topic_ids
            assert session.epoch >= 2  # "d" came in an incremental fetch
            # A seek is a changed partition: sent in the session, read again.
            consumer.seek(("t", 3), 1)
            assert await read(consumer, 1) == [(3, 1, b"b")]
            assert [s.id for s in sessions_of_consumers(broker)] == [session.id]
            await producer.close()
            await consumer.close()

    run(scenario)


def test_consumer_starts_over_in_full_when_its_session_is_gone(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            producer, consumer = await setup(broker)
            await producer.send_and_wait("t", b"a", partition=5)
            assert await read(consumer, 1) == [(5, 0, b"a")]
            (lost,) = sessions_of_consumers(broker)
            # Another fetcher's full fetch naming the session closes it (as an eviction).
            conn = await connect(broker)
            closing = FetchRequest(
                replica_id=-1,
                max_wait_ms=0,
                min_bytes=1,
                max_bytes=1,
                isolation_level=0,
                session_id=lost.id,
                session_epoch=-1,
                topics=[],
                forgotten_topics_data=[],
                rack_id="",
            )
            assert (await conn.send(closing, 12)).session_id == 0
            await conn.close()
            assert sessions_of_consumers(broker) == []
            await producer.send_and_wait("t", b"b", partition=5)
            await producer.send_and_wait("t", b"c", partition=30)
            # FETCH_SESSION_ID_NOT_FOUND, then a full fetch opens a new session.
            assert await read(consumer, 2) == [(5, 1, b"b"), (30, 0, b"c")]
            (renewed,) = sessions_of_consumers(broker)
            assert renewed.id != lost.id and len(renewed.partitions) == PARTITIONS
            assert await read(consumer, 1, polls=5) == []  # nothing read twice
            await producer.close()
            await consumer.close()

    run(scenario)


def test_closing_the_consumer_closes_its_session_on_the_broker(tmp_path: Path) -> None:
    """As Kafka's consumer does: a fetch in the final epoch frees the broker's slot at
    once, rather than when the session is evicted."""

    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            producer, consumer = await setup(broker)
            await producer.send_and_wait("t", b"a", partition=1)
            assert await read(consumer, 1) == [(1, 0, b"a")]
            assert len(sessions_of_consumers(broker)) == 1
            await consumer.close()
            assert sessions_of_consumers(broker) == []
            await producer.close()

    run(scenario)
