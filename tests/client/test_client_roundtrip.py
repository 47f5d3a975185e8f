"""AsyncProducer and AsyncConsumer against one in-process broker: every codec, leader
epochs on records, next offsets to commit, headers and timestamps."""

from __future__ import annotations

from pathlib import Path

import pytest
from inprocess_broker import run, running_broker

from epochlog.client import AsyncConsumer, AsyncProducer, OffsetAndEpoch, TopicPartition
from epochlog.client.admin import AsyncAdmin


def bootstrap(broker: object) -> str:
    return f"127.0.0.1:{broker.port}"  # type: ignore[attr-defined]


async def consume_all(consumer: AsyncConsumer, count: int) -> list:
    got: list = []
    for _ in range(200):
        got.extend(await consumer.poll(200))
        if len(got) >= count:
            break
    return got


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_produce_with_codec_then_consume_with_epochs_and_next_offsets(
    tmp_path: Path, codec: str
) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            admin = AsyncAdmin({"bootstrap.servers": bootstrap(broker)}, broker.seams)
            await admin.create_topic("t", partitions=1, replication_factor=1)
            producer = AsyncProducer(
                {"bootstrap.servers": bootstrap(broker), "compression.type": codec, "linger.ms": 5},
                broker.seams,
            )
            futures = [
                await producer.send(
                    "t",
                    b"value-%d" % i,
                    key=b"k%d" % i,
                    headers=[("seq", b"%d" % i)],
                    timestamp=1_700_000_000_000 + i,
                )
                for i in range(50)
            ]
            assert await producer.flush(30)
            metas = [f.result() for f in futures]
            assert [m.offset for m in metas] == list(range(50))
            assert {m.partition for m in metas} == {0}
            await producer.close()

            consumer = AsyncConsumer(
                {"bootstrap.servers": bootstrap(broker), "auto.offset.reset": "earliest"},
                broker.seams,
            )
            consumer.assign([("t", 0)])
            got = await consume_all(consumer, 50)
            assert [(r.offset, r.key, r.value) for r in got] == [
                (i, b"k%d" % i, b"value-%d" % i) for i in range(50)
            ]
            assert all(r.leader_epoch == 0 for r in got)
            assert got[7].headers == [("seq", b"7")]
            assert got[7].timestamp == 1_700_000_000_007
            assert consumer.position(("t", 0)) == OffsetAndEpoch(50, 0)
            await consumer.close()
            await admin.close()

    run(scenario)


def test_poll_hands_back_next_offsets_per_partition(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            admin = AsyncAdmin({"bootstrap.servers": bootstrap(broker)}, broker.seams)
            await admin.create_topic("t", partitions=3, replication_factor=1)
            producer = AsyncProducer({"bootstrap.servers": bootstrap(broker)}, broker.seams)
            for i in range(30):
                await producer.send("t", b"v", key=b"key-%d" % i)
            assert await producer.flush(30)
            await producer.close()
            consumer = AsyncConsumer(
                {"bootstrap.servers": bootstrap(broker), "auto.offset.reset": "earliest"},
                broker.seams,
            )
            consumer.assign([("t", p) for p in range(3)])
            seen: dict[TopicPartition, OffsetAndEpoch] = {}
            count = 0
            for _ in range(100):
                batch = await consumer.poll(200)
                count += len(batch)
                seen.update(batch.next_offsets())
                if count >= 30:
                    break
            assert count == 30
            assert sum(o.offset for o in seen.values()) == 30
            assert {o.leader_epoch for o in seen.values()} == {0}
            await consumer.close()
            await admin.close()

    run(scenario)


def test_latest_starts_at_the_log_end_and_seek_without_epoch_reads_from_there(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            admin = AsyncAdmin({"bootstrap.servers": bootstrap(broker)}, broker.seams)
            await admin.create_topic("t", partitions=1, replication_factor=1)
            producer = AsyncProducer({"bootstrap.servers": bootstrap(broker)}, broker.seams)
            for i in range(5):
                await producer.send("t", b"%d" % i)
            assert await producer.flush(30)
            consumer = AsyncConsumer({"bootstrap.servers": bootstrap(broker)}, broker.seams)
            consumer.assign([("t", 0)])
            assert list(await consumer.poll(100)) == []
            assert consumer.position(("t", 0)) == OffsetAndEpoch(5, None)
            await producer.send_and_wait("t", b"5")
            got = await consume_all(consumer, 1)
            assert [r.value for r in got] == [b"5"]
            consumer.seek(("t", 0), 2)
            got = await consume_all(consumer, 4)
            assert [r.offset for r in got] == [2, 3, 4, 5]
            await producer.close()
            await consumer.close()
            await admin.close()

    run(scenario)
