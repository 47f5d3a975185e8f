"""KIP-232 on the wire, with `offsets.commit.reject.stale.leader.epoch`: confluent-kafka,
kafka-python and epochlog's client each commit across a leader change (a commit in the
old epoch, at or past an offset committed in the new one, is refused with
INVALID_LEADER_EPOCH) and across a deletion and re-creation of the topic (a commit in an
epoch the new topic never had is refused with INVALID_PARTITION_EPOCH; the deleted
topic's committed offsets went with it, as in Kafka, so the new topic's consumer starts
from none). What a client was refused is never stored: each reads back the last commit
that passed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import confluent_kafka
import kafka
import kafka.errors
from cluster_harness import Cluster, eventually, running_cluster
from kafka.structs import OffsetAndMetadata

from epochlog.client import Consumer, OffsetAndEpoch, TopicPartition
from epochlog.client.errors import KafkaClientError
from epochlog.protocol.errors import ErrorCode

TOPIC = "kip232"
SETTINGS = {
    "offsets.commit.reject.stale.leader.epoch": "true",
    "offsets.topic.num.partitions": "1",
    "offsets.topic.replication.factor": "3",
}

Commit = Callable[[int, int], int]
Committed = Callable[[], tuple[int, int] | None]
Client = tuple[Commit, Committed, Callable[[], None]]


def confluent_committer(bootstrap: str, group: str) -> Client:
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
    )

    def commit(offset: int, epoch: int) -> int:
        tp = confluent_kafka.TopicPartition(TOPIC, 0, offset, leader_epoch=epoch)
        try:
            (answer,) = consumer.commit(offsets=[tp], asynchronous=False)
        except confluent_kafka.KafkaException as e:
            return e.args[0].code()
        return answer.error.code() if answer.error else 0

    def committed() -> tuple[int, int] | None:
        (tp,) = consumer.committed([confluent_kafka.TopicPartition(TOPIC, 0)], timeout=20)
        return None if tp.offset < 0 else (tp.offset, tp.leader_epoch)

    return commit, committed, consumer.close


def kafka_python_committer(bootstrap: str, group: str) -> Client:
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False
    )
    tp = kafka.TopicPartition(TOPIC, 0)

    def commit(offset: int, epoch: int) -> int:
        try:
            consumer.commit({tp: OffsetAndMetadata(offset, "", epoch)})
        except kafka.errors.BrokerResponseError as e:
            return e.errno
        return 0

    def committed() -> tuple[int, int] | None:
        found = consumer.committed(tp, metadata=True)
        return None if found is None else (found.offset, found.leader_epoch)

    return commit, committed, consumer.close


def epochlog_committer(bootstrap: str, group: str) -> Client:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    tp = TopicPartition(TOPIC, 0)

    def commit(offset: int, epoch: int) -> int:
        try:
            consumer.commit({tp: OffsetAndEpoch(offset, epoch)})
        except KafkaClientError as e:
            return e.code
        return 0

    def committed() -> tuple[int, int] | None:
        found = consumer.committed([tp])[tp]
        if found is None:
            return None
        return found.offset, -1 if found.leader_epoch is None else found.leader_epoch

    return commit, committed, consumer.close


CLIENTS = {
    "confluent-kafka": confluent_committer,
    "kafka-python": kafka_python_committer,
    "epochlog": epochlog_committer,
}


def recreate(cluster: Cluster, replicas: list[int]) -> None:
    first_id = cluster.metadata(TOPIC)["topic_id"]
    admin = cluster.admin()  # kept: a handle destroyed mid-request fails it
    admin.delete_topics([TOPIC], operation_timeout=30)[TOPIC].result(60)
    eventually(lambda: cluster.metadata(TOPIC)["error"] == 3, 30, "the topic gone everywhere")
    cluster.create_topic(TOPIC, assignment=[replicas])
    for broker in replicas:
        eventually(
            lambda b=broker: cluster.metadata(TOPIC, via=b)["topic_id"] not in (None, first_id),
            30,
            f"broker {broker} to know the new topic",
        )


def test_commits_across_a_leader_change_and_a_recreation_are_fenced_by_their_epochs(
    tmp_path: Path, metastore_uri: str
) -> None:
    with running_cluster(tmp_path, metastore_uri, **SETTINGS) as cluster:
        clients = {name: make(cluster.bootstrap, f"g-{name}") for name, make in CLIENTS.items()}
        try:
            commit_across_a_leader_change_and_a_recreation(cluster, clients)
        finally:
            for _, _, close in clients.values():
                close()


def commit_across_a_leader_change_and_a_recreation(
    cluster: Cluster, clients: dict[str, Client]
) -> None:
    controller = cluster.controller_id()
    old_leader, successor = [b for b in range(3) if b != controller]
    cluster.create_topic(TOPIC, assignment=[[old_leader, successor, controller]])
    assert cluster.leader(TOPIC) == (old_leader, 0)
    for name, (commit, _, _) in clients.items():
        assert commit(3, 0) == 0, name

    cluster.brokers[old_leader].stop()
    eventually(lambda: cluster.leader(TOPIC) == (successor, 1), 30, "leadership to move on")
    for name, (commit, committed, _) in clients.items():
        assert commit(5, 1) == 0, name
        # A consumer that missed the leader change commits a later position of its own
        # in the old epoch: refused, the newer commit stays.
        assert commit(7, 0) == ErrorCode.INVALID_LEADER_EPOCH, name
        assert committed() == (5, 1), name
        # A deliberate rewind in the old epoch is no stale position.
        assert commit(4, 0) == 0, name
        assert commit(5, 1) == 0, name

    recreate(cluster, [successor, controller])
    assert cluster.leader(TOPIC) == (successor, 0)
    for name, (commit, committed, _) in clients.items():
        # A position read from the deleted topic carries its epoch 1, which the new topic
        # never had.
        assert commit(9, 1) == ErrorCode.INVALID_PARTITION_EPOCH, name
        # The deleted topic's offsets went with it: the new topic starts with none.
        assert committed() is None, name
        assert commit(9, 0) == 0, name
        assert committed() == (9, 0), name
