"""epochlog's sync Producer and Consumer against a real broker process, with
confluent-kafka on the other side: records read back byte for byte both ways, and
keys on the same partitions as librdkafka's murmur2_random."""

from __future__ import annotations

import confluent_kafka as ck
import pytest

from epochlog.client import Consumer, Producer
from epochlog.client.partitioner import key_partition
from support.broker import BrokerProcess
from support.clients import confluent_consume, confluent_produce, create_topic
from support.records import Got, assert_same_records, make_records

pytestmark = pytest.mark.interop
COUNT = 2000


def epochlog_consume(bootstrap: str, topic: str, count: int) -> list[Got]:
    with Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"}) as c:
        c.assign([(topic, 0)])
        got: list[Got] = []
        for _ in range(600):
            for r in c.poll(0.5):
                assert r.leader_epoch == 0
                got.append(Got(r.offset, r.key, r.value, list(r.headers), r.timestamp))
            if len(got) >= count:
                break
        return got


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_epochlog_writes_what_confluent_kafka_reads(
    module_broker: BrokerProcess, codec: str
) -> None:
    topic = f"el-to-ck-{codec}"
    create_topic(module_broker.bootstrap, topic)
    recs = make_records(COUNT, f"el{codec}")
    with Producer(
        {"bootstrap.servers": module_broker.bootstrap, "compression.type": codec}
    ) as producer:
        futures = [producer.send(topic, r.value, r.key, 0, r.headers, r.timestamp) for r in recs]
        assert producer.flush(120)
        assert [f.result(60).offset for f in futures] == list(range(COUNT))
    assert_same_records(recs, confluent_consume(module_broker.bootstrap, topic, COUNT))


def test_confluent_kafka_writes_what_epochlog_reads(module_broker: BrokerProcess) -> None:
    topic = "ck-to-el"
    create_topic(module_broker.bootstrap, topic)
    recs = make_records(COUNT, "ckel")
    confluent_produce(module_broker.bootstrap, topic, recs, "lz4")
    assert_same_records(recs, epochlog_consume(module_broker.bootstrap, topic, COUNT))


def test_keys_land_where_librdkafka_murmur2_random_puts_them(module_broker: BrokerProcess) -> None:
    topic = "partitioner"
    partitions = 7
    create_topic(module_broker.bootstrap, topic, partitions=partitions)
    keys = [b"key-%d" % i for i in range(200)] + [b"", b"a", b"\xff\x00\x10"]
    theirs: dict[bytes, int] = {}
    producer = ck.Producer(
        {"bootstrap.servers": module_broker.bootstrap, "partitioner": "murmur2_random"}
    )
    for k in keys:
        producer.produce(
            topic, b"v", k, on_delivery=lambda e, m: theirs.__setitem__(m.key(), m.partition())
        )
    assert producer.flush(60) == 0
    with Producer({"bootstrap.servers": module_broker.bootstrap}) as ours:
        futures = {k: ours.send(topic, b"v", k) for k in keys}
        assert ours.flush(60)
        mine = {k: f.result(60).partition for k, f in futures.items()}
    assert mine == theirs
    assert mine == {k: key_partition(k, partitions) for k in keys}
