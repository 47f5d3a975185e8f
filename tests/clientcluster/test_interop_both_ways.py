"""Interop both ways on a real broker process, with both other Python clients: what
epochlog's Producer writes (keys, values, headers, timestamps, every codec),
confluent-kafka and kafka-python read byte for byte, and what each of them writes
epochlog's Consumer reads byte for byte; null keys and values stay null; keys land on
the partitions of librdkafka's ``murmur2_random`` and kafka-python's default
partitioner (both the Java client's murmur2)."""

from __future__ import annotations

import time

import confluent_kafka as ck
import kafka
import pytest

from epochlog.client import Consumer, Producer
from epochlog.client.partitioner import key_partition
from support.broker import BrokerProcess
from support.clients import (
    CODECS,
    confluent_consume,
    confluent_produce,
    create_topic,
    kafka_python_consume,
    kafka_python_produce,
)
from support.records import Got, Rec, assert_same_records, make_records

pytestmark = pytest.mark.interop
COUNT = 1000
READ_BOUND_S = 120.0


def epochlog_produce(bootstrap: str, topic: str, recs: list[Rec], codec: str) -> list[int]:
    with Producer({"bootstrap.servers": bootstrap, "compression.type": codec}) as producer:
        futures = [producer.send(topic, r.value, r.key, 0, r.headers, r.timestamp) for r in recs]
        assert producer.flush(READ_BOUND_S)
        return [f.result(READ_BOUND_S).offset for f in futures]


def epochlog_consume(bootstrap: str, topic: str, count: int) -> list[Got]:
    with Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"}) as c:
        c.assign([(topic, 0)])
        got: list[Got] = []
        deadline = time.monotonic() + READ_BOUND_S
        while len(got) < count and time.monotonic() < deadline:
            for r in c.poll(0.5):
                assert r.leader_epoch == 0
                got.append(Got(r.offset, r.key, r.value, list(r.headers), r.timestamp))
        return got


@pytest.mark.parametrize("codec", CODECS)
def test_epochlog_writes_what_confluent_kafka_and_kafka_python_read(
    module_broker: BrokerProcess, codec: str
) -> None:
    topic = f"both-from-el-{codec}"
    create_topic(module_broker.bootstrap, topic)
    recs = make_records(COUNT, f"el-{codec}")
    assert epochlog_produce(module_broker.bootstrap, topic, recs, codec) == list(range(COUNT))
    assert_same_records(recs, confluent_consume(module_broker.bootstrap, topic, COUNT))
    assert_same_records(recs, kafka_python_consume(module_broker.bootstrap, topic, COUNT))


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("writer", ["confluent-kafka", "kafka-python"])
def test_other_clients_write_what_epochlog_reads(
    module_broker: BrokerProcess, writer: str, codec: str
) -> None:
    topic = f"to-el-{writer}-{codec}"
    create_topic(module_broker.bootstrap, topic)
    recs = make_records(COUNT, f"{writer}-{codec}")
    produce = confluent_produce if writer == "confluent-kafka" else kafka_python_produce
    assert produce(module_broker.bootstrap, topic, recs, codec) == list(range(COUNT))
    assert_same_records(recs, epochlog_consume(module_broker.bootstrap, topic, COUNT))


def test_null_keys_and_values_stay_null_both_ways(module_broker: BrokerProcess) -> None:
    """None is not b"": a tombstone (null value) and an unkeyed record keep their nulls."""
    bootstrap = module_broker.bootstrap
    recs = [
        Rec(None, b"unkeyed", [], 1_767_225_600_000),
        Rec(b"tombstone", None, [("h", b"")], 1_767_225_600_001),
        Rec(None, None, [], 1_767_225_600_002),
        Rec(b"", b"", [("empty", b"")], 1_767_225_600_003),
    ]
    expected = [(r.key, r.value, r.headers) for r in recs]
    create_topic(bootstrap, "nulls-from-el")
    epochlog_produce(bootstrap, "nulls-from-el", recs, "none")
    for got in (
        confluent_consume(bootstrap, "nulls-from-el", len(recs)),
        kafka_python_consume(bootstrap, "nulls-from-el", len(recs)),
    ):
        assert [(g.key, g.value, g.headers) for g in got] == expected
    # kafka-python refuses a record with neither key nor value; it writes the others.
    some = [r for r in recs if r.key is not None or r.value is not None]
    for name, produce, written in (
        ("ck", confluent_produce, recs),
        ("kp", kafka_python_produce, some),
    ):
        topic = f"nulls-from-{name}"
        create_topic(bootstrap, topic)
        produce(bootstrap, topic, written, "none")
        got = epochlog_consume(bootstrap, topic, len(written))
        assert [(g.key, g.value, g.headers) for g in got] == [
            (r.key, r.value, r.headers) for r in written
        ], name


def test_keys_land_where_librdkafka_and_kafka_python_put_them(
    module_broker: BrokerProcess,
) -> None:
    bootstrap = module_broker.bootstrap
    topic = "partitioner-three-ways"
    partitions = 11
    create_topic(bootstrap, topic, partitions=partitions)
    keys = [b"key-%d" % i for i in range(300)] + [b"", b"a", b"\xff\x00\x10", "é".encode()]
    librdkafka: dict[bytes, int] = {}
    producer = ck.Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random"})
    for k in keys:
        producer.produce(
            topic, b"v", k, on_delivery=lambda e, m: librdkafka.__setitem__(m.key(), m.partition())
        )
    assert producer.flush(60) == 0
    kp = kafka.KafkaProducer(bootstrap_servers=bootstrap)
    try:
        kp_futures = {k: kp.send(topic, key=k, value=b"v") for k in keys}
        kp.flush(60)
        kafka_python = {k: f.get(60).partition for k, f in kp_futures.items()}
    finally:
        kp.close(30)
    with Producer({"bootstrap.servers": bootstrap}) as ours:
        futures = {k: ours.send(topic, b"v", k) for k in keys}
        assert ours.flush(60)
        mine = {k: f.result(60).partition for k, f in futures.items()}
    assert mine == librdkafka
    assert mine == kafka_python
    assert mine == {k: key_partition(k, partitions) for k in keys}
    assert len(set(mine.values())) == partitions  # the keys spread over every partition
