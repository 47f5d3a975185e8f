"""DeleteRecords on a 3-broker cluster, through confluent-kafka's and kafka-python's
admin clients and `epochlog records delete`: the log start moves on the leader, then on
the followers (so a new leader keeps it), survives a restart, is never past the high
watermark, and what is before it is no longer served; a cluster restarted whole keeps it
from each broker's checkpoint."""

from __future__ import annotations

import json
from pathlib import Path

import confluent_kafka as ck
from cluster_harness import Cluster, eventually, running_cluster
from kafka import KafkaAdminClient
from kafka import TopicPartition as KpTopicPartition

from support.broker import run_epochlog

TOPIC = "trimmed"
EARLIEST = -2


def produce(cluster: Cluster, count: int) -> None:
    producer = ck.Producer({"bootstrap.servers": cluster.live_bootstrap(), "acks": "all"})
    for i in range(count):
        producer.produce(TOPIC, b"%d" % i, partition=0)
    assert producer.flush(60) == 0


def log_start(cluster: Cluster, broker: int) -> int:
    answer = cluster.list_offsets(broker, TOPIC, 0, EARLIEST, replica_id=-2)
    assert answer.error == 0, answer
    return answer.offset


def checkpointed(cluster: Cluster, broker: int) -> int | None:
    """The partition's entry in a broker's log-start-offset checkpoint (Kafka's format:
    version, count, then `topic partition offset` lines)."""
    path = cluster.brokers[broker].log_dir / "log-start-offset-checkpoint"
    lines = path.read_text().splitlines()[2:] if path.exists() else []
    found = [int(f[2]) for f in (line.split() for line in lines) if f[:2] == [TOPIC, "0"]]
    return found[0] if found else None


def first_read(cluster: Cluster) -> int:
    consumer = ck.Consumer(
        {"bootstrap.servers": cluster.live_bootstrap(), "group.id": "trim-reader",
         "auto.offset.reset": "earliest", "enable.auto.commit": False}
    )  # fmt: skip
    consumer.assign([ck.TopicPartition(TOPIC, 0)])
    errors: list[str] = []
    try:
        for _ in range(100):
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                return message.offset()
            if message is not None:
                errors.append(str(message.error()))
        raise AssertionError(f"nothing read; the consumer's errors: {errors}")
    finally:
        consumer.close()


def test_delete_records_moves_the_log_start_everywhere_and_keeps_it(tmp_path: Path) -> None:
    with running_cluster(
        tmp_path,
        f"sqlite://{tmp_path}/metastore.db",
        **{"log.flush.start.offset.checkpoint.interval.ms": "200"},
    ) as cluster:
        cluster.create_topic(TOPIC)
        produce(cluster, 20)
        admin = ck.admin.AdminClient({"bootstrap.servers": cluster.live_bootstrap()})
        (done,) = admin.delete_records([ck.TopicPartition(TOPIC, 0, 5)]).values()
        assert done.result(30).low_watermark == 5
        leader, _ = cluster.leader(TOPIC)
        assert log_start(cluster, leader) == 5
        assert first_read(cluster) == 5
        for broker in range(3):  # followers take it from their fetch answers
            eventually(lambda b=broker: log_start(cluster, b) == 5, 30, f"broker {broker} at 5")

        kp = KafkaAdminClient(bootstrap_servers=cluster.live_bootstrap())
        try:
            kp.delete_records({KpTopicPartition(TOPIC, 0): 8})
        finally:
            kp.close()
        assert log_start(cluster, leader) == 8

        past = admin.delete_records([ck.TopicPartition(TOPIC, 0, 21)])
        error = next(iter(past.values())).exception(30)
        assert error is not None and "OFFSET_OUT_OF_RANGE" in str(error)
        assert log_start(cluster, leader) == 8  # a refused request changes nothing

        spec = tmp_path / "offsets.json"
        spec.write_text(
            json.dumps({"partitions": [{"topic": TOPIC, "partition": 0, "offset": 12}]})
        )
        moved = run_epochlog(
            "records", "delete", "--offset-json-file", str(spec),
            "--bootstrap-server", cluster.live_bootstrap(),
        )  # fmt: skip
        assert moved.returncode == 0, moved.stderr
        assert moved.stdout.splitlines()[1].split() == [TOPIC, "0", "12"]
        for broker in range(3):
            eventually(lambda b=broker: log_start(cluster, b) == 12, 30, f"broker {broker}")

        cluster.kill(leader)  # a new leader keeps the log start it followed
        eventually(lambda: cluster.leader(TOPIC)[0] not in (-1, leader), 60, "a new leader")
        new_leader, _ = cluster.leader(TOPIC)
        assert log_start(cluster, new_leader) == 12
        cluster.brokers[leader].restart()  # and so does a restarted broker, checkpointed
        eventually(lambda: log_start(cluster, leader) == 12, 60, "the restarted broker")
        assert first_read(cluster) == 12
        for broker in range(3):  # followers checkpoint it on their interval, as Kafka's
            eventually(lambda b=broker: checkpointed(cluster, b) == 12, 30, f"{broker} checkpoint")
        for broker in range(3):  # all down at once: only the checkpoint remembers it
            cluster.kill(broker)
        for broker in range(3):
            cluster.brokers[broker].restart()
        eventually(lambda: cluster.leader(TOPIC)[0] >= 0, 60, "a leader after the restart")
        assert log_start(cluster, cluster.leader(TOPIC)[0]) == 12
        assert first_read(cluster) == 12
