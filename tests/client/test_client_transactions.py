"""epochlog's transactional producer and read_committed consumer against a real broker
process: commit and abort, offsets sent to the transaction with their leader epochs,
fencing by a second holder, prepared transactions completed elsewhere, and aborted
records dropped by both poll and poll_arrow (checked against confluent-kafka)."""

from __future__ import annotations

import confluent_kafka as ck
import pytest

from epochlog.client import (
    Consumer,
    GroupMetadata,
    OffsetAndEpoch,
    Producer,
    TopicPartition,
    TransactionError,
)
from support.broker import BrokerProcess
from support.clients import create_topic


def transactional(bootstrap: str, tid: str) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid})
    producer.init_transactions(60)
    return producer


def read_all(bootstrap: str, topic: str, isolation: str, arrow: bool = False) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "auto.offset.reset": "earliest",
            "isolation.level": isolation,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0)])
        got: list[bytes] = []
        idle = 0
        while idle < 3:
            if arrow:
                batch = consumer.poll_arrow(0.5)
                values = [v for v in batch.column("value").to_pylist()]
            else:
                values = [r.value for r in consumer.poll(0.5)]
            got.extend(values)
            idle = 0 if values else idle + 1
        return got
    finally:
        consumer.close()


def test_epochlog_transactions_commit_abort_and_read_committed_poll_and_arrow(
    module_broker: BrokerProcess,
) -> None:
    bootstrap = module_broker.bootstrap
    topic = "el-txn"
    create_topic(bootstrap, topic)
    producer = transactional(bootstrap, "el-txn-1")
    try:
        for round_, commit in enumerate((True, False, True, False)):
            producer.begin_transaction()
            for i in range(20):
                producer.produce(topic, f"r{round_}-{i}".encode())
            if commit:
                producer.commit_transaction(60)
            else:
                producer.flush(30)
                producer.abort_transaction(60)
    finally:
        producer.close()
    committed = [f"r{r}-{i}".encode() for r in (0, 2) for i in range(20)]
    everything = [f"r{r}-{i}".encode() for r in range(4) for i in range(20)]
    assert read_all(bootstrap, topic, "read_committed") == committed
    assert read_all(bootstrap, topic, "read_committed", arrow=True) == committed
    assert read_all(bootstrap, topic, "read_uncommitted") == everything
    # The same log through librdkafka's read_committed consumer.
    consumer = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "el-txn-check",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
        seen: list[bytes] = []
        for _ in range(20):
            seen.extend(m.value() for m in consumer.consume(100, 0.5) if m.error() is None)
            if len(seen) >= len(committed):
                break
    finally:
        consumer.close()
    assert seen == committed


def test_send_offsets_to_transaction_commits_the_consumer_positions_with_epochs(
    module_broker: BrokerProcess,
) -> None:
    bootstrap = module_broker.bootstrap
    topic = "el-txn-offsets"
    create_topic(bootstrap, topic)
    producer = transactional(bootstrap, "el-txn-offsets")
    try:
        producer.begin_transaction()
        producer.produce(topic, b"out")
        producer.send_offsets_to_transaction(
            {TopicPartition(topic, 0): OffsetAndEpoch(1, 0)}, GroupMetadata("el-group"), 30
        )
        producer.commit_transaction(60)
        producer.begin_transaction()
        producer.send_offsets_to_transaction(
            {TopicPartition(topic, 0): OffsetAndEpoch(9, 0)}, GroupMetadata("el-group"), 30
        )
        producer.abort_transaction(60)
    finally:
        producer.close()
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "el-group"})
    try:
        committed = consumer.committed([TopicPartition(topic, 0)])
    finally:
        consumer.close()
    assert committed[TopicPartition(topic, 0)] == OffsetAndEpoch(1, 0)


def test_a_second_holder_fences_the_first_epochlog_producer(
    module_broker: BrokerProcess,
) -> None:
    bootstrap = module_broker.bootstrap
    topic = "el-txn-fenced"
    create_topic(bootstrap, topic)
    first = transactional(bootstrap, "el-fenced")
    second = transactional(bootstrap, "el-fenced")
    try:
        first.begin_transaction()
        first.produce(topic, b"zombie")
        with pytest.raises(TransactionError) as failure:
            first.commit_transaction(30)
        assert failure.value.fatal or failure.value.abortable
        second.begin_transaction()
        second.produce(topic, b"successor")
        second.commit_transaction(60)
    finally:
        first.close()
        second.close()
    assert read_all(bootstrap, topic, "read_committed") == [b"successor"]


def test_a_prepared_transaction_is_committed_by_another_producer(
    module_broker: BrokerProcess,
) -> None:
    bootstrap = module_broker.bootstrap
    topic = "el-txn-prepared"
    create_topic(bootstrap, topic)
    worker = transactional(bootstrap, "el-prepared")
    worker.begin_transaction()
    worker.produce(topic, b"from the worker")
    prepared = worker.prepare_transaction(30)
    worker.close()  # leaves the transaction open
    assert read_all(bootstrap, topic, "read_committed") == []
    driver = Producer({"bootstrap.servers": bootstrap, "transactional.id": "el-prepared"})
    try:
        driver.complete_transaction(prepared, True, 30)
    finally:
        driver.close()
    assert read_all(bootstrap, topic, "read_committed") == [b"from the worker"]


def test_sends_outside_a_transaction_are_refused(module_broker: BrokerProcess) -> None:
    producer = Producer(
        {"bootstrap.servers": module_broker.bootstrap, "transactional.id": "el-outside"}
    )
    try:
        producer.init_transactions(30)
        with pytest.raises(TransactionError):
            producer.send("anything", b"x").result(10)
    finally:
        producer.close()
