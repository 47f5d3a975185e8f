"""Fetch sessions (KIP-227) and follower fetching with confluent-kafka consumers: three
broker processes, a topic of many partitions at replication 3 of which few get records;
followers replicate in incremental sessions, a leader is SIGKILLed mid-way, and every
reader (confluent-kafka, which fetches in full, kafka-python and epochlog's consumer,
which fetch incrementally) reads every acknowledged record exactly once, in order."""

from __future__ import annotations

import time
from pathlib import Path

import confluent_kafka as ck
from cluster_harness import eventually, running_cluster
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition

from epochlog.client import Consumer, TopicPartition
from support.clients import confluent_producer

TOPIC = "many"
PARTITIONS = 60
HOT = (7, 23, 41)
PER_ROUND = 100
BOUND_S = 60.0

Read = list[tuple[int, int, bytes]]


def produce(bootstrap: str, tag: str) -> None:
    producer = confluent_producer(bootstrap)
    errors: list[object] = []
    for partition in HOT:
        for i in range(PER_ROUND):
            producer.produce(
                TOPIC,
                value=f"{tag}-{partition}-{i}".encode(),
                partition=partition,
                on_delivery=lambda err, _msg: errors.append(err) if err else None,
            )
    assert producer.flush(BOUND_S) == 0 and errors == []


def expected() -> Read:
    return sorted(
        (p, offset, f"{tag}-{p}-{i}".encode())
        for p in HOT
        for offset, (tag, i) in enumerate(
            [("before", i) for i in range(PER_ROUND)] + [("after", i) for i in range(PER_ROUND)]
        )
    )


def confluent_read(bootstrap: str, count: int) -> Read:
    consumer = ck.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    consumer.assign([ck.TopicPartition(TOPIC, p, ck.OFFSET_BEGINNING) for p in range(PARTITIONS)])
    got: Read = []
    deadline = time.monotonic() + BOUND_S
    try:
        while len(got) < count and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                got.append((message.partition(), message.offset(), message.value()))
    finally:
        consumer.close()
    return sorted(got)


def kafka_python_read(bootstrap: str, count: int) -> Read:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    consumer.assign([KafkaTopicPartition(TOPIC, p) for p in range(PARTITIONS)])
    consumer.seek_to_beginning()
    got: Read = []
    deadline = time.monotonic() + BOUND_S
    try:
        while len(got) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                got += [(r.partition, r.offset, r.value) for r in records]
    finally:
        consumer.close()
    return sorted(got)


def epochlog_read(bootstrap: str, count: int) -> Read:
    with Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"}) as consumer:
        consumer.assign([TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
        got: Read = []
        deadline = time.monotonic() + BOUND_S
        while len(got) < count and time.monotonic() < deadline:
            got += [(r.partition, r.offset, r.value) for r in consumer.poll(0.2)]
    return sorted(got)


def test_readers_of_many_partitions_get_every_record_across_a_leader_kill(
    tmp_path: Path,
) -> None:
    metastore = f"sqlite://{tmp_path}/metastore.db"
    with running_cluster(tmp_path, metastore) as cluster:
        cluster.create_topic(TOPIC, partitions=PARTITIONS, replication=3, min_insync_replicas="2")
        produce(cluster.bootstrap, "before")
        victim, old_epoch = cluster.leader(TOPIC, HOT[0])
        cluster.brokers[victim].kill()

        def moved() -> bool:
            leader, epoch = cluster.leader(TOPIC, HOT[0])
            return leader not in (-1, victim) and epoch > old_epoch

        eventually(moved, 60, "a new leader")
        live = cluster.live_bootstrap()
        produce(live, "after")
        want = expected()
        assert confluent_read(live, len(want)) == want
        assert kafka_python_read(live, len(want)) == want
        assert epochlog_read(live, len(want)) == want
