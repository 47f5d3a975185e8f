"""The idempotent producer on an in-process broker: ``max.request.size`` refuses a
record at send time naming the setting; after an unclean truncation the leader's
OUT_OF_ORDER_SEQUENCE_NUMBER makes the producer take a new producer id and go on
(logged); a batch that fails for good does not leave a sequence gap that would refuse
every later batch (the producer id is renewed instead)."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any

import pytest
from inprocess_broker import run, running_broker

from epochlog.client import AsyncConsumer, AsyncProducer, DeliveryError, TopicPartition
from epochlog.client.admin import AsyncAdmin
from epochlog.client.producer import RecordTooLargeError
from epochlog.protocol.errors import ErrorCode

PRODUCER_LOG = "epochlog.client.producer"


def bootstrap(broker: Any) -> str:
    return f"127.0.0.1:{broker.port}"


def move_to_epoch(broker: Any, epoch: int, truncate_to: int) -> None:
    """What an unclean election does to the leader's log, and the metadata it serves."""
    partition = broker.replica_manager.partition("t", 0)
    partition.truncate_to(truncate_to, "test: unclean election")
    state = partition.state.__class__(leader=0, leader_epoch=epoch, replicas=[0], isr=[0])
    partition.become_leader(state)
    topic = broker.metadata_cache.topic("t")
    broker.metadata_cache.update_topic(dataclasses.replace(topic, partitions={0: state}))


async def create(broker: Any, **configs: str) -> AsyncAdmin:
    admin = AsyncAdmin({"bootstrap.servers": bootstrap(broker)}, seams=broker.seams)
    await admin.create_topic("t", partitions=1, replication_factor=1, configs=configs)
    return admin


def producer(broker: Any, **conf: Any) -> AsyncProducer:
    return AsyncProducer(
        {"bootstrap.servers": bootstrap(broker), "retry.backoff.ms": 10, **conf}, broker.seams
    )


async def read_all(broker: Any, count: int) -> list[tuple[int, bytes | None]]:
    consumer = AsyncConsumer(
        {"bootstrap.servers": bootstrap(broker), "auto.offset.reset": "earliest"}, broker.seams
    )
    consumer.assign([("t", 0)])
    got: list[Any] = []
    for _ in range(300):
        if len(got) >= count:
            break
        got.extend(await consumer.poll(200))
    await consumer.close()
    return [(r.offset, r.value) for r in got]


def renewals(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == PRODUCER_LOG and "sequences reset" in r.getMessage()
    ]


def test_max_request_size_refuses_a_record_at_send_time(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            admin = await create(broker)
            p = producer(broker, **{"max.request.size": 1000, "linger.ms": 50})
            with pytest.raises(RecordTooLargeError, match=r"max\.request\.size \(1000\)") as e:
                await p.send("t", b"x" * 1000, partition=0)
            assert e.value.code is ErrorCode.MESSAGE_TOO_LARGE
            assert isinstance(e.value, DeliveryError)
            # Records that fit are batched below the limit and all delivered.
            futures = [await p.send("t", b"%03d" % i + b"y" * 297, partition=0) for i in range(20)]
            offsets = [(await f).offset for f in futures]
            assert offsets == list(range(20))
            await p.close()
            await admin.close()
            assert [o for o, _ in await read_all(broker, 20)] == list(range(20))

    run(scenario)


def test_out_of_order_sequence_after_unclean_truncation_renews_the_producer_id(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=PRODUCER_LOG)

    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            admin = await create(broker)
            p = producer(broker)
            for i in range(5):  # one batch each: truncation cuts at batch boundaries
                await p.send_and_wait("t", b"old-%d" % i, partition=0)
            before = p._producer_ids.producer
            # The new leader kept offsets 0..2: sequences 3 and 4 of this producer are gone.
            move_to_epoch(broker, 1, truncate_to=3)
            after = [await p.send_and_wait("t", b"new-%d" % i, partition=0) for i in range(3)]
            assert [m.offset for m in after] == [3, 4, 5]
            assert p._producer_ids.producer != before
            await p.close()
            await admin.close()
            assert await read_all(broker, 6) == [
                (0, b"old-0"),
                (1, b"old-1"),
                (2, b"old-2"),
                (3, b"new-0"),
                (4, b"new-1"),
                (5, b"new-2"),
            ]

    run(scenario)
    (line,) = renewals(caplog)
    assert "OUT_OF_ORDER_SEQUENCE_NUMBER" in line


def test_a_batch_refused_for_good_leaves_no_sequence_gap(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=PRODUCER_LOG)

    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            admin = await create(broker, **{"max.message.bytes": "300"})
            p = producer(broker)
            assert (await p.send_and_wait("t", b"small-0", partition=0)).offset == 0
            with pytest.raises(DeliveryError) as refused:
                await p.send_and_wait("t", b"z" * 400, partition=0)  # over the topic's limit
            assert refused.value.code is ErrorCode.MESSAGE_TOO_LARGE
            later = [await p.send_and_wait("t", b"small-%d" % i, partition=0) for i in (1, 2)]
            assert [m.offset for m in later] == [1, 2]
            await p.close()
            await admin.close()

    run(scenario)
    (line,) = renewals(caplog)
    assert "a batch failed" in line
    # The gap never reached the broker: no later batch was refused out of order.
    assert not [r for r in caplog.records if "OUT_OF_ORDER" in r.getMessage()]


def test_a_batch_failing_after_its_retries_leaves_no_sequence_gap(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=PRODUCER_LOG)

    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            admin = await create(broker)
            p = producer(broker, retries=2)
            assert (await p.send_and_wait("t", b"first", partition=0)).offset == 0
            # One broker cannot meet min.insync.replicas=2: acks=all is refused, retried.
            await admin.alter_topic_configs("t", {"min.insync.replicas": "2"})
            with pytest.raises(DeliveryError, match=r"after 3 tries") as failed:
                await p.send_and_wait("t", b"refused", partition=0)
            assert failed.value.code is ErrorCode.NOT_ENOUGH_REPLICAS
            await admin.alter_topic_configs("t", {"min.insync.replicas": "1"})
            assert (await p.send_and_wait("t", b"second", partition=0)).offset == 1
            await p.close()
            await admin.close()
            assert await read_all(broker, 2) == [(0, b"first"), (1, b"second")]

    run(scenario)
    (line,) = renewals(caplog)
    assert "NOT_ENOUGH_REPLICAS" in line
    assert not [r for r in caplog.records if "OUT_OF_ORDER" in r.getMessage()]


def test_recovery_keeps_other_partitions_going(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            admin = AsyncAdmin({"bootstrap.servers": bootstrap(broker)}, seams=broker.seams)
            await admin.create_topic("t", partitions=2, replication_factor=1)
            p = producer(broker)
            for i in range(3):
                await p.send_and_wait("t", b"a%d" % i, partition=0)
                await p.send_and_wait("t", b"b%d" % i, partition=1)
            move_to_epoch(broker, 1, truncate_to=1)
            got = [await (await p.send("t", b"x%d" % i, partition=i % 2)) for i in range(6)]
            assert sorted((m.partition, m.offset) for m in got) == [
                (0, 1),
                (0, 2),
                (0, 3),
                (1, 3),
                (1, 4),
                (1, 5),
            ]
            assert TopicPartition("t", 0) not in p._in_flight
            await p.close()
            await admin.close()

    run(scenario)


def test_sync_producer_reports_a_record_too_large_to_its_callback(module_broker) -> None:
    from epochlog.client import Producer
    from support.clients import create_topic

    create_topic(module_broker.bootstrap, "big", 1)
    seen: list[BaseException | None] = []
    with Producer({"bootstrap.servers": module_broker.bootstrap, "max.request.size": 500}) as p:
        p.produce("big", b"x" * 600, on_delivery=lambda err, meta: seen.append(err))
        future = p.send("big", b"y" * 600)
        with pytest.raises(RecordTooLargeError, match="max.request.size"):
            future.result(120)
        assert p.flush(120)
    assert len(seen) == 1 and isinstance(seen[0], RecordTooLargeError)
