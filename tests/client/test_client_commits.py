"""Commits with leader epochs on an in-process broker: commit/committed round trips,
auto-commit, a member starting from a committed offset validates it with its epoch
first (KIP-320) and waits while the committed epoch is ahead of its metadata, and
offsets_for_times keeps the answered leader epoch."""

from __future__ import annotations

import asyncio
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
    OffsetAndTimestamp,
    TopicIdChangedError,
    TopicPartition,
)
from epochlog.client.admin import AsyncAdmin
from epochlog.client.positions import Phase

SETTINGS = {
    "offsets.topic.num.partitions": "3",
    "offsets.topic.replication.factor": "1",
    "group.initial.rebalance.delay.ms": "0",
}
TP = TopicPartition("t", 0)
POLLS = 600  # a hang guard: polls of up to 200 ms each


def bootstrap(broker: Any) -> str:
    return f"127.0.0.1:{broker.port}"


def move_to_epoch(broker: Any, epoch: int, truncate_to: int | None = None) -> None:
    """What an unclean election does to the leader's log, and the metadata it serves."""
    partition = broker.replica_manager.partition("t", 0)
    if truncate_to is not None:
        partition.truncate_to(truncate_to, "test: unclean election")
    state = partition.state.__class__(leader=0, leader_epoch=epoch, replicas=[0], isr=[0])
    partition.become_leader(state)
    topic = broker.metadata_cache.topic("t")
    broker.metadata_cache.update_topic(dataclasses.replace(topic, partitions={0: state}))


def consumer(broker: Any, group: str, **conf: Any) -> AsyncConsumer:
    settings = {
        "bootstrap.servers": bootstrap(broker),
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "retry.backoff.ms": 10,
        "heartbeat.interval.ms": 200,
        "session.timeout.ms": 10000,
    }
    settings.update(conf)
    return AsyncConsumer(settings, broker.seams)


async def produce(broker: Any, values: list[bytes], first_timestamp: int) -> None:
    producer = AsyncProducer({"bootstrap.servers": bootstrap(broker)}, broker.seams)
    for i, value in enumerate(values):  # one batch each: truncation cuts at batch boundaries
        await producer.send_and_wait("t", value, partition=0, timestamp=first_timestamp + i)
    await producer.close()


async def create(broker: Any, partitions: int = 1) -> None:
    admin = AsyncAdmin({"bootstrap.servers": bootstrap(broker)}, broker.seams)
    await admin.create_topic("t", partitions=partitions, replication_factor=1)
    await admin.close()


async def read(c: AsyncConsumer, count: int) -> list[Any]:
    got: list[Any] = []
    for _ in range(POLLS):
        if len(got) >= count:
            return got
        got.extend(await c.poll(200))
    raise AssertionError(f"read {len(got)} of {count} records")


def test_commit_and_committed_carry_leader_epochs(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path, **SETTINGS) as broker:
            await create(broker, partitions=2)
            await produce(broker, [b"a", b"b", b"c"], 1_000)
            c = consumer(broker, "g")
            tp1 = TopicPartition("t", 1)
            assert await c.committed([TP, tp1]) == {TP: None, tp1: None}
            await c.commit({TP: OffsetAndEpoch(2, 0), ("t", 1): OffsetAndEpoch(0)})
            assert await c.committed([TP, ("t", 1)]) == {
                TP: OffsetAndEpoch(2, 0),
                tp1: OffsetAndEpoch(0, None),
            }
            c.subscribe(["t"])
            for _ in range(POLLS):
                records = await c.poll(200)
                if records:
                    break
            assert [r.offset for r in records] == [2]  # from the committed offset
            assert records.next_offsets() == {TP: OffsetAndEpoch(3, 0)}
            await c.commit()  # the positions after what poll returned
            assert (await c.committed([TP]))[TP] == OffsetAndEpoch(3, 0)
            await c.close()

    run(scenario)


def test_auto_commit_commits_records_already_returned(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path, **SETTINGS) as broker:
            await create(broker)
            await produce(broker, [b"a", b"b", b"c", b"d"], 1_000)
            c = consumer(
                broker, "auto", **{"enable.auto.commit": True, "auto.commit.interval.ms": 0}
            )
            c.subscribe(["t"])
            await read(c, 4)
            await c.poll(0)  # the next poll commits what the previous ones returned
            assert (await c.committed([TP]))[TP] == OffsetAndEpoch(4, 0)
            await produce(broker, [b"e"], 2_000)
            await read(c, 1)
            await c.close()  # close commits too
            reader = consumer(broker, "auto")
            assert (await reader.committed([TP]))[TP] == OffsetAndEpoch(5, 0)
            await reader.close()

    run(scenario)


def test_auto_commit_of_assigned_partitions_commits_as_a_standalone_consumer(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path, **SETTINGS) as broker:
            await create(broker)
            await produce(broker, [b"a", b"b", b"c"], 1_000)
            c = consumer(
                broker, "assigned", **{"enable.auto.commit": True, "auto.commit.interval.ms": 0}
            )
            c.assign([TP])
            await read(c, 3)
            await c.poll(0)
            assert (await c.committed([TP]))[TP] == OffsetAndEpoch(3, 0)
            await c.close()

    run(scenario)


def test_auto_commit_before_a_rebalance_hands_over_without_rereads(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path, **SETTINGS) as broker:
            await create(broker, partitions=2)
            await produce(broker, [b"a", b"b", b"c"], 1_000)  # all on t-0
            # A long interval: only the commit before rejoining can store positions.
            auto = {"enable.auto.commit": True, "auto.commit.interval.ms": 600_000}
            first = consumer(broker, "handover", **auto)
            first.subscribe(["t"])
            await read(first, 3)
            assert (await first.committed([TP]))[TP] is None

            second = consumer(broker, "handover", **auto)
            second.subscribe(["t"])
            joining = asyncio.ensure_future(second.poll(100))  # its JoinGroup waits for first
            got: list[Any] = []
            for _ in range(POLLS):
                if len(first.assignment()) == 1 and joining.done():
                    break
                got.extend(await first.poll(100))  # rejoins once its heartbeat tells it
            assert joining.done() and got == []
            await joining
            assert (await first.committed([TP]))[TP] == OffsetAndEpoch(3, 0)
            mine = first.assignment() + second.assignment()
            assert sorted(mine) == [TP, TopicPartition("t", 1)]
            await produce(broker, [b"d"], 2_000)
            owner = first if first.assignment() == [TP] else second
            records = await read(owner, 1)
            assert [(r.offset, r.value) for r in records] == [(3, b"d")]  # nothing re-read
            await first.close()
            await second.close()

    run(scenario)


@pytest.mark.parametrize("policy", ["none", "earliest"])
def test_starting_from_a_committed_offset_validates_its_epoch_first(
    tmp_path: Path, policy: str
) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path, **SETTINGS) as broker:
            await create(broker)
            await produce(broker, [b"old-%d" % i for i in range(5)], 1_000)
            first = consumer(broker, "g")
            first.subscribe(["t"])
            await read(first, 5)
            await first.commit()
            await first.close()
            # An unclean election: the new leader's log ends at 3, epoch 1 from there.
            move_to_epoch(broker, 1, truncate_to=3)
            await produce(broker, [b"new-3", b"new-4"], 2_000)

            second = consumer(broker, "g", **{"auto.offset.reset": policy})
            second.subscribe(["t"])
            if policy == "none":
                with pytest.raises(LogTruncationError) as raised:
                    await read(second, 1)
                assert raised.value.divergence == {TP: 3}
            else:
                records = await read(second, 2)
                assert [(r.offset, r.value, r.leader_epoch) for r in records] == [
                    (3, b"new-3", 1),
                    (4, b"new-4", 1),
                ]
            await second.close()

    run(scenario)


def test_a_committed_epoch_ahead_of_metadata_waits_for_it(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path, **SETTINGS) as broker:
            await create(broker)
            await produce(broker, [b"a", b"b"], 1_000)
            writer = consumer(broker, "ahead")
            # Committed by a member that already saw epoch 3 (this broker still serves 0).
            await writer.commit({TP: OffsetAndEpoch(2, 3)})
            await writer.close()

            c = consumer(broker, "ahead", **{"auto.offset.reset": "none"})
            c.subscribe(["t"])
            for _ in range(5):
                assert list(await c.poll(100)) == []
            # No validation against epoch 0 (it would report a truncation): it waits.
            assert c.phase(TP) is Phase.AWAIT_VALIDATION
            assert c.position(TP) == OffsetAndEpoch(2, 3)

            move_to_epoch(broker, 3)
            await produce(broker, [b"c"], 2_000)
            records = await read(c, 1)
            assert [(r.offset, r.value, r.leader_epoch) for r in records] == [(2, b"c", 3)]
            await c.close()

    run(scenario)


def test_offsets_for_times_keeps_the_leader_epoch(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path, **SETTINGS) as broker:
            await create(broker)
            await produce(broker, [b"a", b"b", b"c"], 1_000)
            move_to_epoch(broker, 2)
            await produce(broker, [b"d"], 5_000)
            c = AsyncConsumer({"bootstrap.servers": bootstrap(broker)}, broker.seams)
            assert await c.offsets_for_times({TP: 1_001}) == {TP: OffsetAndTimestamp(1, 1_001, 0)}
            assert await c.offsets_for_times({("t", 0): 3_000}) == {
                TP: OffsetAndTimestamp(3, 5_000, 2)
            }
            assert await c.offsets_for_times({TP: 9_000}) == {TP: None}
            await c.close()

    run(scenario)


def test_a_subscribed_topic_recreated_is_reported_not_read(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path, **SETTINGS) as broker:
            await create(broker)
            await produce(broker, [b"a", b"b"], 1_000)
            c = consumer(broker, "recreated", **{"metadata.max.age.ms": 100})
            c.subscribe(["t"])
            await read(c, 2)
            admin = AsyncAdmin({"bootstrap.servers": bootstrap(broker)}, broker.seams)
            await admin.delete_topic("t")
            await admin.create_topic("t", partitions=1, replication_factor=1)
            await admin.close()
            await produce(broker, [b"new"], 2_000)
            with pytest.raises(TopicIdChangedError) as raised:
                await read(c, 1)
            assert raised.value.partitions == [TP]
            await c.close()

    run(scenario)
