"""poll_arrow against brokers: the same rows and positions as poll(), every partition
in one RecordBatch, an empty answer with the schema, and truncation raising the same
LogTruncationError (in-process broker); the sync Consumer against a broker process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from inprocess_broker import run, running_broker
from test_client_truncation import move_to_epoch, new_writer, setup

from epochlog.client import (
    AsyncConsumer,
    AsyncProducer,
    Consumer,
    LogTruncationError,
    OffsetAndEpoch,
    TopicPartition,
)
from epochlog.client.admin import AsyncAdmin
from epochlog.client.arrow_batches import ARROW_SCHEMA
from support.broker import BrokerProcess
from support.clients import confluent_produce, create_topic
from support.records import make_records

T0 = 1_700_000_000_000


def bootstrap(broker: Any) -> str:
    return f"127.0.0.1:{broker.port}"


def consumer_of(broker: Any, **extra: object) -> AsyncConsumer:
    config = {"bootstrap.servers": bootstrap(broker), "auto.offset.reset": "earliest"}
    return AsyncConsumer({**config, **extra}, broker.seams)


async def arrow_rows(consumer: AsyncConsumer, count: int) -> list[dict]:
    rows: list[dict] = []
    for _ in range(200):
        batch = await consumer.poll_arrow(200)
        assert batch.schema == ARROW_SCHEMA
        rows.extend(batch.to_pylist())
        if len(rows) >= count:
            break
    return rows


async def record_rows(consumer: AsyncConsumer, count: int) -> list[dict]:
    got: list = []
    for _ in range(200):
        got.extend(await consumer.poll(200))
        if len(got) >= count:
            break
    return [
        {
            "topic": r.topic,
            "partition": r.partition,
            "offset": r.offset,
            "key": r.key,
            "value": r.value,
            "timestamp": r.timestamp,
            "leaderEpoch": r.leader_epoch,
            "headers": [{"key": k, "value": v} for k, v in r.headers],
        }
        for r in got
    ]


def comparable(rows: list[dict]) -> list[dict]:
    out = []
    for row in rows:
        row = dict(row)
        row.pop("timestampType", None)
        ts = row["timestamp"]
        row["timestamp"] = round(ts.timestamp() * 1000) if hasattr(ts, "timestamp") else ts
        out.append(row)
    return sorted(out, key=lambda r: (r["partition"], r["offset"]))


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_same_rows_and_positions_as_poll(tmp_path: Path, codec: str) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            admin = AsyncAdmin({"bootstrap.servers": bootstrap(broker)}, broker.seams)
            await admin.create_topic("t", partitions=3, replication_factor=1)
            producer = AsyncProducer(
                {"bootstrap.servers": bootstrap(broker), "compression.type": codec, "linger.ms": 5},
                broker.seams,
            )
            for i in range(120):
                await producer.send(
                    "t",
                    None if i % 11 == 0 else b"value-%d" % i,
                    key=None if i % 7 == 0 else b"key-%d" % i,
                    headers=[("seq", b"%d" % i)] if i % 3 == 0 else None,
                    timestamp=T0 + i,
                )
            assert await producer.flush(30)
            await producer.close()

            partitions = [("t", p) for p in range(3)]
            by_records, by_arrow = consumer_of(broker), consumer_of(broker)
            by_records.assign(partitions)
            by_arrow.assign(partitions)
            expected = await record_rows(by_records, 120)
            got = await arrow_rows(by_arrow, 120)
            assert len(got) == 120
            assert comparable(got) == comparable(expected)
            assert {r["leaderEpoch"] for r in got} == {0}
            assert {r["timestampType"] for r in got} == {0}
            for tp in partitions:
                assert by_arrow.position(tp) == by_records.position(tp)
            assert sum(by_arrow.position(tp).offset for tp in partitions) == 120  # type: ignore[union-attr]
            # Nothing more: an empty batch with the schema, positions unchanged.
            empty = await by_arrow.poll_arrow(50)
            assert empty.num_rows == 0 and empty.schema == ARROW_SCHEMA
            for c in (by_records, by_arrow):
                await c.close()
            await admin.close()

    run(scenario)


def test_seek_and_latest(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            admin = AsyncAdmin({"bootstrap.servers": bootstrap(broker)}, broker.seams)
            await admin.create_topic("t", partitions=1, replication_factor=1)
            producer = AsyncProducer({"bootstrap.servers": bootstrap(broker)}, broker.seams)
            for i in range(10):
                await producer.send_and_wait("t", b"%d" % i)
            consumer = consumer_of(broker, **{"auto.offset.reset": "latest"})
            consumer.assign([("t", 0)])
            assert (await consumer.poll_arrow(100)).num_rows == 0
            assert consumer.position(("t", 0)) == OffsetAndEpoch(10, None)
            consumer.seek(("t", 0), 4)
            rows = await arrow_rows(consumer, 6)
            assert [r["offset"] for r in rows] == list(range(4, 10))
            assert [r["value"] for r in rows] == [b"%d" % i for i in range(4, 10)]
            assert consumer.position(("t", 0)) == OffsetAndEpoch(10, 0)
            await producer.close()
            await consumer.close()
            await admin.close()

    run(scenario)


def test_truncation_raises_the_same_error_as_poll(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            producer, consumer, admin = await setup(broker, "none")
            move_to_epoch(broker, 1, truncate_to=3)
            writer = new_writer(broker)
            await writer.send_and_wait("t", b"new-3")
            with pytest.raises(LogTruncationError) as info:
                for _ in range(50):
                    await consumer.poll_arrow(100)
            assert info.value.divergence == {TopicPartition("t", 0): 3}
            with pytest.raises(LogTruncationError):
                await consumer.poll_arrow(10)
            consumer.seek(("t", 0), 3, leader_epoch=0)
            rows = await arrow_rows(consumer, 1)
            assert [(r["offset"], r["value"], r["leaderEpoch"]) for r in rows] == [(3, b"new-3", 1)]
            assert consumer.position(("t", 0)) == OffsetAndEpoch(4, 1)
            for c in (producer, writer, consumer, admin):
                await c.close()

    run(scenario)


def test_sync_consumer_reads_what_confluent_kafka_wrote(module_broker: BrokerProcess) -> None:
    topic = "poll-arrow-sync"
    create_topic(module_broker.bootstrap, topic)
    recs = make_records(2000, "sync")
    confluent_produce(module_broker.bootstrap, topic, recs, "lz4")
    config = {"bootstrap.servers": module_broker.bootstrap, "auto.offset.reset": "earliest"}
    with Consumer(config) as consumer:
        consumer.assign([(topic, 0)])
        batches: list[pa.RecordBatch] = []
        for _ in range(600):
            batches.append(consumer.poll_arrow(0.5))
            if sum(b.num_rows for b in batches) >= len(recs):
                break
        table = pa.Table.from_batches(batches, schema=ARROW_SCHEMA)
        assert table.column("offset").to_pylist() == list(range(len(recs)))
        assert table.column("key").to_pylist() == [r.key for r in recs]
        assert table.column("value").to_pylist() == [r.value for r in recs]
        assert table.column("headers").to_pylist() == [
            [{"key": k, "value": v} for k, v in r.headers] for r in recs
        ]
        assert table.column("timestamp").cast(pa.int64()).to_pylist() == [r.timestamp for r in recs]
        assert set(table.column("topic").to_pylist()) == {topic}
        assert consumer.position((topic, 0)) == OffsetAndEpoch(len(recs), 0)
