"""The admin client: settings by Kafka's names, the cluster with leader epochs, offsets
with epochs (earliest, latest, by timestamp), groups listed and described with their
members' assignments, committed offsets listed, altered and deleted with epochs,
groups deleted. In-process broker, and the synchronous Admin on a broker process."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import pytest
from inprocess_broker import run, running_broker

from epochlog.client import (
    Admin,
    AsyncAdmin,
    AsyncConsumer,
    AsyncProducer,
    ConfigError,
    OffsetAndEpoch,
    OffsetAndTimestamp,
    TopicPartition,
)
from epochlog.client.admin import EARLIEST, LATEST
from epochlog.client.errors import KafkaClientError
from epochlog.protocol.errors import ErrorCode
from epochlog.seams.real import real_seams
from support.clients import create_topic

SETTINGS = {
    "offsets.topic.num.partitions": "3",
    "offsets.topic.replication.factor": "1",
    "group.initial.rebalance.delay.ms": "0",
}
TP = TopicPartition("t", 0)


def bootstrap(broker: Any) -> str:
    return f"127.0.0.1:{broker.port}"


def move_to_epoch(broker: Any, epoch: int) -> None:
    partition = broker.replica_manager.partition("t", 0)
    state = partition.state.__class__(leader=0, leader_epoch=epoch, replicas=[0], isr=[0])
    partition.become_leader(state)
    topic = broker.metadata_cache.topic("t")
    broker.metadata_cache.update_topic(dataclasses.replace(topic, partitions={0: state}))


async def produce(broker: Any, values: list[bytes], first_timestamp: int) -> None:
    producer = AsyncProducer({"bootstrap.servers": bootstrap(broker)}, broker.seams)
    for i, value in enumerate(values):
        await producer.send_and_wait("t", value, partition=0, timestamp=first_timestamp + i)
    await producer.close()


def test_settings_are_checked_and_the_old_constructor_still_works(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="bootstrap.servers"):
        AsyncAdmin({"bootstrap.servers": "no-port"}, real_seams())
    with pytest.raises(ConfigError, match="request.timeout.ms"):
        AsyncAdmin({"bootstrap.servers": "h:1", "request.timeout.ms": 0}, real_seams())
    with pytest.raises(ConfigError, match="linger.ms: unknown setting"):
        AsyncAdmin({"bootstrap.servers": "h:1", "linger.ms": 5}, real_seams())

    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            old = AsyncAdmin({"bootstrap.servers": bootstrap(broker)}, broker.seams)
            new = AsyncAdmin({"bootstrap.servers": bootstrap(broker)}, seams=broker.seams)
            await old.create_topic("t", partitions=2, replication_factor=1)
            assert [
                p.partition for p in (await new.describe_cluster(["t"])).topics["t"].partitions
            ] == [0, 1]
            assert await new.partitions(["t"]) == [TP, TopicPartition("t", 1)]
            await old.close()
            await new.close()

    run(scenario)


def test_cluster_and_offsets_carry_leader_epochs(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            admin = AsyncAdmin({"bootstrap.servers": bootstrap(broker)}, seams=broker.seams)
            await admin.create_topic("t", partitions=1, replication_factor=1)
            await produce(broker, [b"a", b"b"], 1_000)
            move_to_epoch(broker, 4)
            await produce(broker, [b"c"], 3_000)
            info = await admin.describe_cluster(["t"])
            (p0,) = info.topics["t"].partitions
            assert (p0.leader, p0.leader_epoch, p0.isr) == (0, 4, [0])
            answers = await admin.list_offsets({TP: EARLIEST})
            assert answers[TP] is not None and answers[TP].offset == 0
            latest = await admin.list_offsets({("t", 0): LATEST})
            assert (latest[TP].offset, latest[TP].leader_epoch) == (3, 4)
            assert await admin.list_offsets({TP: 1_001}) == {TP: OffsetAndTimestamp(1, 1_001, 0)}
            assert await admin.list_offsets({TP: 2_000}) == {TP: OffsetAndTimestamp(2, 3_000, 4)}
            assert await admin.list_offsets({TP: 9_000}) == {TP: None}
            # KIP-320's question to one broker: where an epoch ends on it.
            assert await admin.epoch_end_offset(0, "t", 0, 0) == (0, 2)
            assert await admin.epoch_end_offset(0, "t", 0, 3) == (0, 2)
            assert await admin.epoch_end_offset(0, "t", 0, 4) == (4, 3)
            asked = await admin.describe_cluster(["t"], via=0)
            assert (asked.racks, asked.topics["t"].partitions) == ({0: None}, [p0])
            with pytest.raises(KafkaClientError, match="UNKNOWN_TOPIC_OR_PARTITION"):
                await AsyncAdmin(
                    {"bootstrap.servers": bootstrap(broker), "default.api.timeout.ms": 300},
                    seams=broker.seams,
                ).list_offsets({("missing", 0): LATEST})
            await admin.close()

    run(scenario)


def test_groups_listed_described_offsets_altered_and_deleted(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path, **SETTINGS) as broker:
            admin = AsyncAdmin({"bootstrap.servers": bootstrap(broker)}, seams=broker.seams)
            await admin.create_topic("t", partitions=1, replication_factor=1)
            await produce(broker, [b"a", b"b", b"c"], 1_000)
            member = AsyncConsumer(
                {
                    "bootstrap.servers": bootstrap(broker),
                    "group.id": "g",
                    "client.id": "member-1",
                    "auto.offset.reset": "earliest",
                    "enable.auto.commit": False,
                    "heartbeat.interval.ms": 200,
                },
                broker.seams,
            )
            member.subscribe(["t"])
            got: list[Any] = []
            for _ in range(300):
                if len(got) >= 3:
                    break
                got.extend(await member.poll(200))
            await member.commit()

            listed = await admin.list_groups()
            assert [(g.group_id, g.protocol_type, g.state) for g in listed] == [
                ("g", "consumer", "Stable")
            ]
            assert await admin.list_groups(["Empty"]) == []
            described = (await admin.describe_groups(["g", "nobody"]))["g"]
            assert (described.state, described.protocol) == ("Stable", "range")
            ((m),) = described.members
            assert (m.client_id, m.assignment) == ("member-1", [TP])
            assert (await admin.describe_groups(["nobody"]))["nobody"].state == "Dead"
            assert await admin.list_consumer_group_offsets("g") == {TP: OffsetAndEpoch(3, 0)}

            # While the member reads the topic its offsets are not the admin's to change.
            with pytest.raises(KafkaClientError, match="GROUP_SUBSCRIBED_TO_TOPIC"):
                await admin.delete_consumer_group_offsets("g", [TP])
            with pytest.raises(KafkaClientError, match="UNKNOWN_MEMBER_ID"):
                await admin.alter_consumer_group_offsets("g", {TP: OffsetAndEpoch(1, 0)})
            assert await admin.delete_groups(["g"]) == {"g": "NON_EMPTY_GROUP"}
            await member.close()

            assert [g.state for g in await admin.list_groups()] == ["Empty"]
            await admin.alter_consumer_group_offsets("g", {("t", 0): OffsetAndEpoch(1, 0)})
            assert await admin.list_consumer_group_offsets("g", [TP]) == {TP: OffsetAndEpoch(1, 0)}
            await admin.delete_consumer_group_offsets("g", [TP])
            assert await admin.list_consumer_group_offsets("g") == {}
            assert await admin.delete_groups(["g", "nobody"]) == {
                "g": None,
                "nobody": ErrorCode.GROUP_ID_NOT_FOUND.name,
            }
            assert await admin.list_groups() == []
            await admin.close()

    run(scenario)


def test_sync_admin_on_a_broker_process(broker_factory) -> None:
    broker = broker_factory({k: int(v) for k, v in SETTINGS.items()})
    create_topic(broker.bootstrap, "t", 2)
    with Admin({"bootstrap.servers": broker.bootstrap}) as admin:
        info = admin.describe_cluster(["t"])
        assert [p.leader_epoch for p in info.topics["t"].partitions] == [0, 0]
        latest = admin.list_offsets({TP: LATEST, ("t", 1): LATEST})
        assert {tp: (a.offset, a.leader_epoch) for tp, a in latest.items()} == {
            TP: (0, 0),
            TopicPartition("t", 1): (0, 0),
        }
        admin.alter_consumer_group_offsets("offline", {TP: OffsetAndEpoch(0, 0)})
        assert admin.list_consumer_group_offsets("offline") == {TP: OffsetAndEpoch(0, 0)}
        assert [g.group_id for g in admin.list_groups()] == ["offline"]
        assert admin.delete_groups(["offline"]) == {"offline": None}


def test_a_call_under_way_when_the_admin_closes_leaves_no_connection_open(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            admin = AsyncAdmin({"bootstrap.servers": bootstrap(broker)}, seams=broker.seams)
            await admin.describe_cluster([])
            (broker_id,) = admin._brokers
            late = asyncio.ensure_future(admin.broker(broker_id))
            await admin.close()  # before the late call has opened its connection
            with pytest.raises(ConnectionError, match="closed"):
                await late
            await asyncio.sleep(0)
            readers = [t for t in asyncio.all_tasks() if "_read_loop" in repr(t.get_coro())]
            assert readers == []

    run(scenario)


def test_a_frozen_broker_holds_a_metadata_request_only_for_request_timeout(
    tmp_path: Path,
) -> None:
    """A broker that accepts connections but answers nothing (a paused process) is given
    up after request.timeout.ms and the next one asked; a lookup then retries for
    default.api.timeout.ms in all."""

    async def scenario() -> None:
        frozen = await asyncio.start_server(lambda _r, _w: None, "127.0.0.1", 0)
        frozen_port = frozen.sockets[0].getsockname()[1]
        async with running_broker(tmp_path, **SETTINGS) as broker:
            creator = AsyncAdmin({"bootstrap.servers": bootstrap(broker)}, broker.seams)
            await creator.create_topic("t", partitions=1, replication_factor=1)
            await creator.close()
            admin = AsyncAdmin(
                {
                    "bootstrap.servers": f"127.0.0.1:{frozen_port},{bootstrap(broker)}",
                    "request.timeout.ms": 300,
                },
                broker.seams,
            )
            started = broker.seams.clock.monotonic()
            latest = await admin.list_offsets({("t", 0): LATEST})
            assert latest[TP].offset == 0
            assert broker.seams.clock.monotonic() - started < 5
            await admin.close()
        frozen.close()

    run(scenario)
