"""Transactions verified before they are written (KIP-890 part 1), against a real broker
process: a transactional batch under another transactional id's producer id, from a
fenced epoch, or to a partition never added to the transaction is refused with Kafka's
error and never stored, so the partition's last stable offset keeps moving; real
transactional producers (confluent-kafka's, epochlog's) are not disturbed."""

from __future__ import annotations

import asyncio
import time

import confluent_kafka as ck

from epochlog.client import Consumer, Producer, TopicPartition
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.records import build_batch
from support.broker import BrokerProcess
from support.clients import create_topic
from support.txn_requests import (
    BOUND_S,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    add_partitions,
    connect,
    init_producer,
    latest_offset,
    produce,
    read_committed,
    txn_batch,
)


def test_forged_and_unregistered_transactional_batches_are_refused_and_not_stored(
    module_broker: BrokerProcess,
) -> None:
    bootstrap, topic = module_broker.bootstrap, "verified"
    create_topic(bootstrap, topic, partitions=2)

    async def scenario() -> dict[str, int]:
        conn = await connect(module_broker.port)
        try:
            pid, epoch = await init_producer(conn, "holder")
            await init_producer(conn, "forger")
            await add_partitions(conn, "holder", pid, epoch, topic, [0])
            answers = {
                # Another transactional id's producer id, to a partition it added.
                "forged": await produce(conn, "forger", topic, 0, txn_batch(pid, epoch, [b"f"])),
                # The holder itself, to a partition it never added.
                "unregistered": await produce(
                    conn, "holder", topic, 1, txn_batch(pid, epoch, [b"u"])
                ),
            }
            # Its epoch, once a new holder's InitProducerId fenced it.
            _, bumped = await init_producer(conn, "holder")
            assert bumped > epoch
            answers["fenced"] = await produce(
                conn, "holder", topic, 1, txn_batch(pid, epoch, [b"e"])
            )
            codes = {what: answer.error_code for what, answer in answers.items()}
            # Nothing was stored; a plain record after the refusals is stable at once.
            plain = build_batch([(None, b"plain", [], int(time.time() * 1000))])
            assert (await produce(conn, None, topic, 1, plain)).error_code == 0
            codes["end"] = await latest_offset(conn, topic, 1, READ_UNCOMMITTED)
            codes["stable"] = await latest_offset(conn, topic, 1, READ_COMMITTED)
            return codes
        finally:
            await conn.close()

    codes = asyncio.run(scenario())
    assert codes == {
        "forged": ErrorCode.INVALID_PRODUCER_ID_MAPPING,
        "unregistered": ErrorCode.INVALID_TXN_STATE,
        "fenced": ErrorCode.INVALID_PRODUCER_EPOCH,
        "end": 1,
        "stable": 1,
    }
    assert read_committed(bootstrap, topic, 1) == [b"plain"]
    # Partition 0 holds the abort marker of the fenced holder's transaction, no record.
    assert read_committed(bootstrap, topic, 0, "read_uncommitted") == []


def test_real_transactional_producers_are_verified_and_commit(
    module_broker: BrokerProcess,
) -> None:
    """confluent-kafka's and epochlog's producers, each transaction over two partitions,
    one committed and one aborted: each first batch at a partition is verified."""
    bootstrap, topic = module_broker.bootstrap, "verified-clients"
    create_topic(bootstrap, topic, partitions=2)
    ckp = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": "ck-verified"})
    ckp.init_transactions(BOUND_S)
    elp = Producer({"bootstrap.servers": bootstrap, "transactional.id": "el-verified"})
    elp.init_transactions(BOUND_S)
    try:
        for commit in (True, False, True):
            ckp.begin_transaction()
            elp.begin_transaction()
            for p in (0, 1):
                ckp.produce(topic, value=f"ck-{commit}-{p}".encode(), partition=p)
                elp.produce(topic, f"el-{commit}-{p}".encode(), partition=p)
            if commit:
                ckp.commit_transaction(BOUND_S)
                elp.commit_transaction(BOUND_S)
            else:
                ckp.flush(BOUND_S)
                elp.flush(BOUND_S)
                ckp.abort_transaction(BOUND_S)
                elp.abort_transaction(BOUND_S)
    finally:
        elp.close()
    for p in (0, 1):
        got = read_committed(bootstrap, topic, p)
        assert sorted(got) == sorted([f"ck-True-{p}".encode(), f"el-True-{p}".encode()] * 2)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + BOUND_S
        while len(values) < 4 and time.monotonic() < deadline:
            values += [r.value for r in consumer.poll(0.5)]
    finally:
        consumer.close()
    assert sorted(values) == sorted([b"ck-True-0", b"el-True-0"] * 2)
