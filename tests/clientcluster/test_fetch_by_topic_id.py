"""The fix the cluster test found: Fetch by topic name read a topic deleted and
re-created with the same leader and epoch from the old offsets. The consumer fetches
by topic ID (Fetch v13); the broker's UNKNOWN_TOPIC_ID makes it refresh metadata, which
reports the change. In-process broker, and the metadata cache's ID lookup."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "broker"))

import pytest  # noqa: E402
from inprocess_broker import run, running_broker  # noqa: E402

from epochlog.client import (  # noqa: E402
    AsyncConsumer,
    AsyncProducer,
    TopicIdChangedError,
    TopicPartition,
)
from epochlog.client.admin import AsyncAdmin  # noqa: E402
from epochlog.client.metadata import (  # noqa: E402
    ZERO_UUID,
    MetadataCache,
    MetadataSnapshot,
    PartitionMetadata,
    TopicMetadata,
)

TP = TopicPartition("t", 0)


def test_cache_gives_the_held_topic_id_and_none_when_unknown() -> None:
    cache = MetadataCache()
    assert cache.topic_id("t") is None
    topic_id = uuid.uuid4()
    parts = {0: PartitionMetadata(0, 0, 0)}
    cache.apply(MetadataSnapshot({}, {"t": TopicMetadata("t", topic_id, parts)}))
    assert cache.topic_id("t") == topic_id
    cache.apply(MetadataSnapshot({}, {"old": TopicMetadata("old", ZERO_UUID, parts)}))
    assert cache.topic_id("old") is None  # a broker without IDs: fetched by name


def test_recreated_topic_on_the_same_leader_and_epoch_is_reported(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            bootstrap = f"127.0.0.1:{broker.port}"
            admin = AsyncAdmin({"bootstrap.servers": bootstrap}, broker.seams)
            await admin.create_topic("t", partitions=1, replication_factor=1)
            producer = AsyncProducer({"bootstrap.servers": bootstrap}, broker.seams)
            for i in range(3):
                await producer.send_and_wait("t", b"old-%d" % i, partition=0)
            consumer = AsyncConsumer(
                {"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"}, broker.seams
            )
            consumer.assign([TP])
            got = []
            while len(got) < 3:
                got.extend(await consumer.poll(200))
            await admin.delete_topic("t")
            await admin.create_topic("t", partitions=1, replication_factor=1)
            writer = AsyncProducer({"bootstrap.servers": bootstrap}, broker.seams)
            for i in range(6):
                await writer.send_and_wait("t", b"new-%d" % i, partition=0)
            with pytest.raises(TopicIdChangedError) as raised:
                for _ in range(50):
                    assert list(await consumer.poll(100)) == []
            assert raised.value.partitions == [TP]
            # Assigned afresh (no position carried over), the new topic is read from
            # the reset policy's start.
            consumer.assign([])
            consumer.assign([TP])
            got = []
            for _ in range(100):
                got.extend(await consumer.poll(100))
                if len(got) >= 6:
                    break
            assert [r.value for r in got] == [b"new-%d" % i for i in range(6)]
            for client in (consumer, producer, writer):
                await client.close()
            await admin.close()

    run(scenario)
