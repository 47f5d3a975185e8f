"""Transactions through real clients against a real broker process: confluent-kafka's,
kafka-python's and aiokafka's transactional producers (commit, abort, offsets sent to the
transaction, fencing by a second holder of the transactional id) and read_committed
consumers of both."""

from __future__ import annotations

import asyncio
import subprocess
import time
from typing import Any

import aiokafka
import confluent_kafka as ck
import kafka
import pytest
from kafka.structs import OffsetAndMetadata, TopicPartition

from support.broker import BrokerProcess, epochlog_command
from support.clients import create_topic

pytestmark = pytest.mark.interop

BOUND_S = 60.0


def ck_transactional(bootstrap: str, tid: str) -> ck.Producer:
    producer = ck.Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 5}
    )
    producer.init_transactions(60)
    return producer


def ck_read(bootstrap: str, topic: str, isolation: str, partitions: int = 1) -> list[bytes]:
    """Every value a fresh consumer with ``isolation`` hands out, up to the end."""
    consumer = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
        }
    )
    try:
        tps = [ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(partitions)]
        consumer.assign(tps)
        got: list[bytes] = []
        idle = 0
        deadline = time.monotonic() + BOUND_S
        while idle < 4 and time.monotonic() < deadline:
            batch = [m for m in consumer.consume(500, 0.5) if m.error() is None]
            got.extend(m.value() for m in batch)
            idle = 0 if batch else idle + 1
        return got
    finally:
        consumer.close()


def kp_read(bootstrap: str, topic: str, isolation: str) -> list[bytes]:
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level=isolation,
    )
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        got: list[bytes] = []
        idle = 0
        deadline = time.monotonic() + BOUND_S
        while idle < 4 and time.monotonic() < deadline:
            polled = consumer.poll(timeout_ms=500)
            batch = [r.value for records in polled.values() for r in records]
            got.extend(batch)
            idle = 0 if batch else idle + 1
        return got
    finally:
        consumer.close()


def test_confluent_commit_and_abort_are_seen_by_read_committed_consumers(
    module_broker: BrokerProcess,
) -> None:
    bootstrap = module_broker.bootstrap
    topic = "txn-commit-abort"
    create_topic(bootstrap, topic)
    producer = ck_transactional(bootstrap, "ck-commit-abort")
    for round_, commit in enumerate((True, False, True)):
        producer.begin_transaction()
        for i in range(50):
            producer.produce(topic, value=f"r{round_}-{i}".encode())
        if commit:
            producer.commit_transaction(60)
        else:
            producer.flush(30)  # in the log before the abort (abort purges unsent records)
            producer.abort_transaction(60)
    committed = [f"r{r}-{i}".encode() for r in (0, 2) for i in range(50)]
    everything = [f"r{r}-{i}".encode() for r in (0, 1, 2) for i in range(50)]
    assert ck_read(bootstrap, topic, "read_committed") == committed
    assert kp_read(bootstrap, topic, "read_committed") == committed
    assert ck_read(bootstrap, topic, "read_uncommitted") == everything
    assert kp_read(bootstrap, topic, "read_uncommitted") == everything


def test_open_transaction_holds_back_read_committed_readers_until_it_ends(
    module_broker: BrokerProcess,
) -> None:
    bootstrap = module_broker.bootstrap
    topic = "txn-open"
    create_topic(bootstrap, topic)
    producer = ck_transactional(bootstrap, "ck-open")
    producer.begin_transaction()
    producer.produce(topic, value=b"first")
    producer.flush(30)
    plain = ck.Producer({"bootstrap.servers": bootstrap})
    plain.produce(topic, value=b"after")  # a non-transactional record behind the open one
    plain.flush(30)
    assert ck_read(bootstrap, topic, "read_uncommitted") == [b"first", b"after"]
    assert ck_read(bootstrap, topic, "read_committed") == []
    # ListOffsets latest: the high watermark, or the last stable offset under
    # read_committed (librdkafka's default isolation).
    assert watermarks(bootstrap, topic, "read_uncommitted") == (0, 2)
    assert watermarks(bootstrap, topic, "read_committed") == (0, 0)
    producer.commit_transaction(60)
    assert ck_read(bootstrap, topic, "read_committed") == [b"first", b"after"]
    assert watermarks(bootstrap, topic, "read_committed") == (0, 3)


def watermarks(bootstrap: str, topic: str, isolation: str) -> tuple[int, int]:
    consumer = ck.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "wm", "isolation.level": isolation}
    )
    try:
        return consumer.get_watermark_offsets(ck.TopicPartition(topic, 0), timeout=10)
    finally:
        consumer.close()


def test_kafka_python_transactional_producer_commits_offsets_and_aborts(
    module_broker: BrokerProcess,
) -> None:
    bootstrap = module_broker.bootstrap
    topic = "txn-kafka-python"
    create_topic(bootstrap, topic)
    producer = kafka.KafkaProducer(
        bootstrap_servers=bootstrap, transactional_id="kp-txn", enable_idempotence=True
    )
    producer.init_transactions()
    producer.begin_transaction()
    for i in range(10):
        producer.send(topic, value=f"kept-{i}".encode())
    producer.send_offsets_to_transaction(
        {TopicPartition(topic, 0): OffsetAndMetadata(7, "", 0)}, "kp-group"
    )
    producer.commit_transaction()
    producer.begin_transaction()
    producer.send(topic, value=b"dropped")
    producer.abort_transaction()
    producer.close()
    expected = [f"kept-{i}".encode() for i in range(10)]
    assert kp_read(bootstrap, topic, "read_committed") == expected
    assert ck_read(bootstrap, topic, "read_committed") == expected
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "kp-group"})
    try:
        (committed,) = consumer.committed([ck.TopicPartition(topic, 0)], 30)
    finally:
        consumer.close()
    assert committed.offset == 7
    assert committed.leader_epoch == 0


def test_second_holder_of_a_transactional_id_fences_the_first(
    module_broker: BrokerProcess,
) -> None:
    bootstrap = module_broker.bootstrap
    topic = "txn-fencing"
    create_topic(bootstrap, topic)
    first = ck_transactional(bootstrap, "ck-fenced")
    first.begin_transaction()
    first.produce(topic, value=b"zombie")
    first.flush(30)
    second = ck_transactional(bootstrap, "ck-fenced")  # aborts the first's transaction
    second.begin_transaction()
    second.produce(topic, value=b"successor")
    second.commit_transaction(60)
    with pytest.raises(ck.KafkaException) as failure:
        first.produce(topic, value=b"zombie-2")
        first.commit_transaction(30)
    assert failure.value.args[0].fatal(), failure.value.args[0]
    assert ck_read(bootstrap, topic, "read_committed") == [b"successor"]
    assert kp_read(bootstrap, topic, "read_committed") == [b"successor"]


def test_epochlog_transactions_cli_lists_and_describes_an_open_transaction(
    module_broker: BrokerProcess,
) -> None:
    bootstrap = module_broker.bootstrap
    topic = "txn-cli"
    create_topic(bootstrap, topic)
    producer = ck_transactional(bootstrap, "ck-cli")
    producer.begin_transaction()
    producer.produce(topic, value=b"open")
    producer.flush(30)

    def cli(*args: str) -> str:
        done = subprocess.run(
            [*epochlog_command(), "transactions", *args, "--bootstrap-server", bootstrap],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    listed = cli("list")
    assert any(line.split()[:1] == ["ck-cli"] and "Ongoing" in line for line in listed.splitlines())
    described = cli("describe", "ck-cli")
    assert "Ongoing" in described and f"{topic}-0" in described
    producers = cli("describe-producers", "--topic", topic, "--partition", "0")
    assert producers.splitlines()[1].split()[-1] == "0"  # its transaction starts at offset 0
    producer.commit_transaction(60)
    assert "CompleteCommit" in cli("describe", "ck-cli")


def test_coordinator_aborts_a_transaction_open_longer_than_its_timeout(
    broker_factory: Any,
) -> None:
    broker = broker_factory({"transaction.abort.timed.out.transaction.cleanup.interval.ms": 300})
    bootstrap = broker.bootstrap
    topic = "txn-timeout"
    create_topic(bootstrap, topic)
    producer = ck.Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": "ck-timeout",
            "transaction.timeout.ms": 2000,
        }
    )
    producer.init_transactions(60)
    producer.begin_transaction()
    producer.produce(topic, value=b"abandoned")
    producer.flush(30)
    assert watermarks(bootstrap, topic, "read_committed") == (0, 0)
    deadline = time.monotonic() + BOUND_S
    while watermarks(bootstrap, topic, "read_committed")[1] == 0:
        assert time.monotonic() < deadline, "the timed-out transaction was never aborted"
        time.sleep(0.5)
    assert ck_read(bootstrap, topic, "read_committed") == []
    assert ck_read(bootstrap, topic, "read_uncommitted") == [b"abandoned"]
    with pytest.raises(ck.KafkaException):
        producer.commit_transaction(30)


def test_aiokafka_transactions_commit_and_abort(module_broker: BrokerProcess) -> None:
    bootstrap = module_broker.bootstrap
    topic = "txn-aiokafka"
    create_topic(bootstrap, topic)

    async def produce_and_read() -> list[bytes]:
        producer = aiokafka.AIOKafkaProducer(
            bootstrap_servers=bootstrap, transactional_id="aio-txn", enable_idempotence=True
        )
        await producer.start()
        try:
            async with producer.transaction():
                for i in range(5):
                    await producer.send_and_wait(topic, f"kept-{i}".encode(), partition=0)
            await producer.begin_transaction()
            await producer.send_and_wait(topic, b"dropped", partition=0)
            await producer.abort_transaction()
        finally:
            await producer.stop()
        consumer = aiokafka.AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            isolation_level="read_committed",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        await consumer.start()
        try:
            consumer.assign([aiokafka.TopicPartition(topic, 0)])
            got: list[bytes] = []
            for _ in range(20):
                batches = await consumer.getmany(timeout_ms=500)
                got += [r.value for records in batches.values() for r in records]
                if len(got) >= 5:
                    break
            return got
        finally:
            await consumer.stop()

    expected = [f"kept-{i}".encode() for i in range(5)]
    assert asyncio.run(produce_and_read()) == expected
    assert ck_read(bootstrap, topic, "read_committed") == expected


def test_a_transaction_aborted_right_after_the_previous_commit_is_aborted(
    module_broker: BrokerProcess,
) -> None:
    """librdkafka begins the next transaction as soon as EndTxn is answered, while the
    coordinator may still write the previous one's markers; an abort that follows at
    once (its records purged unsent) must not be refused."""
    bootstrap = module_broker.bootstrap
    topic = "txn-back-to-back"
    create_topic(bootstrap, topic)
    producer = ck_transactional(bootstrap, "ck-back-to-back")
    for round_ in range(8):
        producer.begin_transaction()
        for i in range(200):
            producer.produce(topic, value=f"r{round_}-{i}".encode())
        if round_ % 2:
            producer.abort_transaction(60)
        else:
            producer.commit_transaction(60)
    expected = [f"r{r}-{i}".encode() for r in range(0, 8, 2) for i in range(200)]
    assert ck_read(bootstrap, topic, "read_committed") == expected
