"""Third-party consumers against fetch sessions (KIP-227) on an in-process broker:
kafka-python 3.0 (its FetchSessionHandler sends incremental fetches) and confluent-kafka
2.16 (librdkafka), each reading a topic of many partitions of which few get records."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import confluent_kafka as ck
from inprocess_broker import batch, connect, create_topic_via_metadata, produce, run, running_broker
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition

PARTITIONS = 20
BOUND_S = 20.0


def consumer_sessions(broker: Any) -> list[Any]:
    return [s for s in broker.fetch_sessions.sessions() if not s.privileged]


async def write(conn: Any, partition: int, values: list[bytes]) -> None:
    answer = await produce(conn, "t", batch(values), partition=partition)
    assert answer.error_code == 0


def kafka_python_assigned(port: int) -> KafkaConsumer:
    consumer = KafkaConsumer(
        bootstrap_servers=f"127.0.0.1:{port}",
        group_id=None,
        enable_auto_commit=False,
        fetch_max_wait_ms=100,
    )
    consumer.assign([KafkaTopicPartition("t", p) for p in range(PARTITIONS)])
    consumer.seek_to_beginning()
    return consumer


def kafka_python_read(consumer: KafkaConsumer, count: int) -> list[tuple[int, int, bytes]]:
    got: list[tuple[int, int, bytes]] = []
    deadline = time.monotonic() + BOUND_S
    while len(got) < count and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=200).values():
            got += [(r.partition, r.offset, r.value) for r in records]
    return got


def confluent_read(consumer: ck.Consumer, count: int) -> list[tuple[int, int, bytes]]:
    got: list[tuple[int, int, bytes]] = []
    deadline = time.monotonic() + BOUND_S
    while len(got) < count and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            got.append((message.partition(), message.offset(), message.value()))
    return got


def test_kafka_python_consumer_reads_through_an_incremental_session(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path, num_partitions=str(PARTITIONS)) as broker:
            conn = await connect(broker)
            await create_topic_via_metadata(conn, "t")
            await write(conn, 4, [b"a", b"b", b"c"])
            await write(conn, 11, [b"d", b"e"])
            # kafka-python blocks while it bootstraps: never on the broker's loop.
            consumer = await asyncio.to_thread(kafka_python_assigned, broker.port)
            try:
                first = await asyncio.to_thread(kafka_python_read, consumer, 5)
                assert sorted(first) == [
                    (4, 0, b"a"),
                    (4, 1, b"b"),
                    (4, 2, b"c"),
                    (11, 0, b"d"),
                    (11, 1, b"e"),
                ]
                await write(conn, 17, [b"f"])
                await write(conn, 4, [b"g"])
                second = await asyncio.to_thread(kafka_python_read, consumer, 2)
                assert sorted(second) == [(4, 3, b"g"), (17, 0, b"f")]
                (session,) = consumer_sessions(broker)
                assert len(session.partitions) == PARTITIONS
                assert session.epoch >= 2  # the later records came in an incremental fetch
            finally:
                await asyncio.to_thread(consumer.close)
            await conn.close()

    run(scenario)


def test_confluent_kafka_consumer_reads_every_record_of_many_partitions(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path, num_partitions=str(PARTITIONS)) as broker:
            conn = await connect(broker)
            await create_topic_via_metadata(conn, "t")
            await write(conn, 2, [b"a", b"b"])
            await write(conn, 19, [b"c"])
            consumer = ck.Consumer(
                {
                    "bootstrap.servers": f"127.0.0.1:{broker.port}",
                    "group.id": "unused",
                    "enable.auto.commit": False,
                    "fetch.wait.max.ms": 100,
                }
            )
            try:
                consumer.assign(
                    [ck.TopicPartition("t", p, ck.OFFSET_BEGINNING) for p in range(PARTITIONS)]
                )
                first = await asyncio.to_thread(confluent_read, consumer, 3)
                assert sorted(first) == [(2, 0, b"a"), (2, 1, b"b"), (19, 0, b"c")]
                await write(conn, 7, [b"d"])
                second = await asyncio.to_thread(confluent_read, consumer, 1)
                assert second == [(7, 0, b"d")]
                # librdkafka 2.16 does not implement KIP-227: it sends session id 0 with
                # epoch -1, so the broker answers in full and keeps no session for it.
                assert consumer_sessions(broker) == []
            finally:
                await asyncio.to_thread(consumer.close)
            await conn.close()

    run(scenario)
