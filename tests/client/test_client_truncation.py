"""KIP-320 on an in-process broker: the partition moves to a new leader epoch with its
log truncated below what the consumer read; the consumer is fenced, refreshes
metadata, validates with OffsetsForLeaderEpoch and raises or moves per policy.
KIP-232: metadata from a broker behind the client is refused."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from inprocess_broker import run, running_broker

from epochlog.client import (
    AsyncConsumer,
    AsyncProducer,
    LogTruncationError,
    OffsetAndEpoch,
    OffsetOutOfRangeError,
    StaleMetadataError,
    TopicPartition,
)
from epochlog.client.admin import AsyncAdmin
from epochlog.client.positions import Phase


def bootstrap(broker: Any) -> str:
    return f"127.0.0.1:{broker.port}"


def move_to_epoch(broker: Any, epoch: int, truncate_to: int | None = None) -> Any:
    """What an unclean election does to the leader's log, and the metadata it serves."""
    partition = broker.replica_manager.partition("t", 0)
    if truncate_to is not None:
        partition.truncate_to(truncate_to, "test: unclean election")
    state = partition.state.__class__(leader=0, leader_epoch=epoch, replicas=[0], isr=[0])
    partition.become_leader(state)
    serve_metadata_epoch(broker, state)
    return state


def serve_metadata_epoch(broker: Any, state: Any) -> None:
    topic = broker.metadata_cache.topic("t")
    broker.metadata_cache.update_topic(dataclasses.replace(topic, partitions={0: state}))


async def setup(broker: Any, policy: str) -> tuple[AsyncProducer, AsyncConsumer, AsyncAdmin]:
    admin = AsyncAdmin({"bootstrap.servers": bootstrap(broker)}, broker.seams)
    await admin.create_topic("t", partitions=1, replication_factor=1)
    producer = AsyncProducer({"bootstrap.servers": bootstrap(broker)}, broker.seams)
    for i in range(5):  # one batch each: truncation cuts at batch boundaries
        await producer.send_and_wait("t", b"old-%d" % i, timestamp=1_000 + i)
    consumer = AsyncConsumer(
        {
            "bootstrap.servers": bootstrap(broker),
            "auto.offset.reset": policy,
            "retry.backoff.ms": 10,
        },
        broker.seams,
    )
    consumer.assign([("t", 0)])
    consumer.seek(("t", 0), 0)
    got = []
    while len(got) < 5:
        got.extend(await consumer.poll(200))
    assert consumer.position(("t", 0)) == OffsetAndEpoch(5, 0)
    return producer, consumer, admin


def new_writer(broker: Any) -> AsyncProducer:
    """The old producer's acknowledged sequences were truncated away with the log; a
    new producer (new producer id) writes what the new leader takes."""
    return AsyncProducer({"bootstrap.servers": bootstrap(broker)}, broker.seams)


async def close(*clients: Any) -> None:
    for c in clients:
        await c.close()


def test_truncation_with_none_raises_naming_partition_and_divergence(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            producer, consumer, admin = await setup(broker, "none")
            move_to_epoch(broker, 1, truncate_to=3)
            writer = new_writer(broker)
            await writer.send_and_wait("t", b"new-3")
            with pytest.raises(LogTruncationError) as info:
                for _ in range(50):
                    await consumer.poll(100)
            assert isinstance(info.value, OffsetOutOfRangeError)
            assert info.value.divergence == {TopicPartition("t", 0): 3}
            assert "t-0 (position 5, divergence offset 3)" in str(info.value)
            # It keeps raising until the application seeks; then reading goes on.
            with pytest.raises(LogTruncationError):
                await consumer.poll(10)
            consumer.seek(("t", 0), 3, leader_epoch=0)
            got = []
            for _ in range(50):
                got.extend(await consumer.poll(100))
                if got:
                    break
            assert [(r.offset, r.value, r.leader_epoch) for r in got] == [(3, b"new-3", 1)]
            # Once detected, however often raised; the application's seek is no reset.
            assert consumer.counts.as_dict() == {
                "records-consumed-total": 6,
                "truncations-detected-total": 1,
                "offset-resets-none-total": 0,
            }
            assert producer.counts.as_dict() == {"record-send-total": 5, "record-error-total": 0}
            await close(producer, writer, consumer, admin)

    run(scenario)


def test_truncation_with_earliest_moves_to_the_divergence_and_rereads(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            producer, consumer, admin = await setup(broker, "earliest")
            move_to_epoch(broker, 1, truncate_to=3)
            writer = new_writer(broker)
            for i in (3, 4, 5):
                await writer.send("t", b"new-%d" % i)
            assert await writer.flush(30)
            got = []
            for _ in range(50):
                got.extend(await consumer.poll(100))
                if len(got) >= 3:
                    break
            assert [(r.offset, r.value, r.leader_epoch) for r in got] == [
                (3, b"new-3", 1),
                (4, b"new-4", 1),
                (5, b"new-5", 1),
            ]
            assert consumer.position(("t", 0)) == OffsetAndEpoch(6, 1)
            assert consumer.counts.as_dict() == {
                "records-consumed-total": 8,
                "truncations-detected-total": 1,
                "offset-resets-earliest-total": 1,
            }
            await close(producer, writer, consumer, admin)

    with caplog.at_level("WARNING", logger="epochlog.client.consumer"):
        run(scenario)
    assert any("position 5 -> 3, re-reads offsets 3..4" in m for m in caplog.messages)


def test_seek_with_an_epoch_validates_before_fetching(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            producer, consumer, admin = await setup(broker, "none")
            move_to_epoch(broker, 2, truncate_to=2)
            consumer.seek(("t", 0), 4, leader_epoch=0)  # a stored position, now gone
            assert consumer.phase(("t", 0)) is Phase.AWAIT_VALIDATION
            with pytest.raises(LogTruncationError) as info:
                for _ in range(50):
                    await consumer.poll(100)
            assert info.value.divergence == {TopicPartition("t", 0): 2}
            await close(producer, consumer, admin)

    run(scenario)


def test_metadata_behind_the_client_is_refused(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            producer, consumer, admin = await setup(broker, "earliest")
            old_state = broker.metadata_cache.topic("t").partitions[0]
            move_to_epoch(broker, 1)
            cluster = consumer._cluster
            await cluster.refresh(["t"])
            assert cluster.cache.partition(TopicPartition("t", 0)).leader_epoch == 1
            serve_metadata_epoch(broker, old_state)  # a broker that has not learnt it
            with pytest.raises(StaleMetadataError, match="t-0 epoch 0 < held 1"):
                await cluster.refresh(["t"], attempts=3)
            assert cluster.cache.partition(TopicPartition("t", 0)).leader_epoch == 1
            await close(producer, consumer, admin)

    run(scenario)
