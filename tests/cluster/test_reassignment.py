"""Partition reassignment (KIP-455) on a 4-broker cluster through kafka-python 3.0's
KafkaAdminClient (confluent-kafka 2.x has no reassignment calls), under continuous
acks=all production from confluent-kafka: no acknowledged record lost or duplicated, a
removed leader hands over at a higher leader epoch, the removed replica's copy goes; a
reassignment held open (its new replica SIGSTOPped) is listed and cancels back to the
original replicas; a controller SIGKILLed in the middle leaves the next to complete it."""

from __future__ import annotations

from pathlib import Path

import kafka.errors
from cluster_harness import Cluster, eventually, running_cluster
from continuous_producer import ContinuousProducer, check_log_holds_exactly_the_acknowledged
from kafka import KafkaAdminClient
from kafka import TopicPartition as KpTopicPartition

from support.clients import confluent_consume

TOPIC = "moving"
TP = KpTopicPartition(TOPIC, 0)
# Acknowledged records wanted before the move and again after it completed.
BEFORE = 2000
AFTER = 2000
# A SIGSTOPped broker stays registered this long: long enough to accept a reassignment
# onto it after it stopped, so that it can never catch up until resumed.
LONG_SESSION = {"zookeeper.session.timeout.ms": "30000"}


def admin(cluster: Cluster) -> KafkaAdminClient:
    """kafka-python's admin client, connected to the controller already: while a broker
    is SIGSTOPped, it then sends to a connected broker rather than maybe the paused one."""
    client = KafkaAdminClient(bootstrap_servers=cluster.live_bootstrap())
    client.list_partition_reassignments()
    return client


def ongoing(
    cluster: Cluster, client: KafkaAdminClient | None = None
) -> dict[KpTopicPartition, dict[str, list[int]]]:
    """ListPartitionReassignments through kafka-python (a new client unless given)."""
    if client is not None:
        return client.list_partition_reassignments()
    fresh = admin(cluster)
    try:
        return fresh.list_partition_reassignments()
    finally:
        fresh.close()


def reassign(
    cluster: Cluster, replicas: list[int] | None, client: KafkaAdminClient | None = None
) -> object:
    """AlterPartitionReassignments of TOPIC-0; the partition's error (None: accepted)."""
    if client is not None:
        return client.alter_partition_reassignments({TP: replicas})[TP]
    fresh = admin(cluster)
    try:
        return fresh.alter_partition_reassignments({TP: replicas})[TP]
    finally:
        fresh.close()


def partition(cluster: Cluster) -> object:
    return cluster.metadata(TOPIC)["partitions"][0]


def segments_of(cluster: Cluster, broker: int) -> list[Path]:
    """Log segments a broker holds for TOPIC-0 (its quarantine apart)."""
    folder = cluster.partition_dir(broker, TOPIC)
    return sorted(folder.glob("*.log")) if folder.is_dir() else []


def produce_across(cluster: Cluster, during: object) -> None:
    """Keep an acks=all producer running from before ``during()`` until records were
    acknowledged after it; then read the log back: every acknowledged record once."""
    producer = ContinuousProducer(cluster.live_bootstrap(), TOPIC).start()
    eventually(lambda: producer.acked() >= BEFORE, 60, "acks before the reassignment")
    during()  # type: ignore[operator]
    acked = producer.acked()
    eventually(lambda: producer.acked() >= acked + AFTER, 60, "acks after the reassignment")
    reports = producer.stop()
    got = confluent_consume(cluster.live_bootstrap(), TOPIC)
    check_log_holds_exactly_the_acknowledged(reports, got)


def test_reassignment_under_acks_all_production_moves_the_leader_and_loses_nothing(
    tmp_path: Path, metastore_uri: str
) -> None:
    with running_cluster(tmp_path, metastore_uri, size=4) as cluster:
        cluster.create_topic(TOPIC, assignment=[[0, 1, 2]], min_insync_replicas="2")
        old_epoch = partition(cluster).leader_epoch

        def move() -> None:
            assert reassign(cluster, [3, 2, 1]) is None
            eventually(
                lambda: partition(cluster).replicas == [3, 2, 1] and not ongoing(cluster),
                60,
                "the reassignment to complete",
            )

        produce_across(cluster, move)
        moved = partition(cluster)
        # The leader was removed: the first target replica leads, at a higher epoch.
        assert moved.leader == 3 and sorted(moved.isr) == [1, 2, 3]
        assert moved.leader_epoch > old_epoch
        # The removed replica's copy is gone (what it held above its high watermark, if
        # anything, is in its quarantine).
        eventually(lambda: segments_of(cluster, 0) == [], 30, "broker 0's segments deleted")
        assert segments_of(cluster, 3), "the new replica holds the log"


def test_reassignment_held_open_is_listed_and_cancels_back_to_the_original_replicas(
    tmp_path: Path, metastore_uri: str
) -> None:
    with running_cluster(tmp_path, metastore_uri, size=4, **LONG_SESSION) as cluster:
        # kafka-python sends reassignment requests to the controller: never pause it.
        x, y, z = [b for b in range(4) if b != cluster.controller_id()]
        cluster.create_topic(TOPIC, assignment=[[x, y]], min_insync_replicas="2")
        before = partition(cluster)

        def hold_open_then_cancel() -> None:
            client = admin(cluster)
            cluster.pause(z)  # registered still, but it can never catch up
            assert reassign(cluster, [z, y], client) is None
            eventually(lambda: TP in ongoing(cluster, client), 30, "the reassignment listed")
            listed = ongoing(cluster, client)[TP]
            assert listed == {
                "replicas": [z, y, x],
                "adding_replicas": [z],
                "removing_replicas": [x],
            }
            # Held open: the new replica is not in the ISR, so nothing completes.
            assert z not in partition(cluster).isr
            assert reassign(cluster, None, client) is None
            eventually(lambda: not ongoing(cluster, client), 30, "the cancelled one gone")
            client.close()
            cluster.resume(z)

        produce_across(cluster, hold_open_then_cancel)
        after = partition(cluster)
        # Kafka's revert: the union less the adding replicas, in the union's order.
        assert after.replicas == [y, x] and after.leader == before.leader == x
        # The adding replica left the assignment: the leader epoch moved on.
        assert after.leader_epoch > before.leader_epoch
        assert reassign(cluster, None) is kafka.errors.NoReassignmentInProgressError


def test_controller_sigkilled_mid_reassignment_leaves_the_next_one_to_complete_it(
    tmp_path: Path, metastore_uri: str
) -> None:
    with running_cluster(tmp_path, metastore_uri, size=4, **LONG_SESSION) as cluster:
        controller = cluster.controller_id()
        leader, new = [b for b in range(4) if b != controller][:2]
        other = [b for b in range(4) if b not in (controller, leader, new)][0]
        # The controller holds no replica: killing it costs the partition nothing.
        cluster.create_topic(TOPIC, assignment=[[leader, other]], min_insync_replicas="1")
        old_epoch = partition(cluster).leader_epoch

        def move_across_failover() -> None:
            client = admin(cluster)
            cluster.pause(new)
            assert reassign(cluster, [new, other], client) is None
            eventually(lambda: TP in ongoing(cluster, client), 30, "the reassignment listed")
            client.close()
            cluster.kill(controller)
            eventually(
                lambda: cluster.controller_id() not in (-1, controller), 60, "a new controller"
            )
            cluster.resume(new)
            eventually(
                lambda: partition(cluster).replicas == [new, other] and not ongoing(cluster),
                90,
                "the new controller to complete the reassignment",
            )

        produce_across(cluster, move_across_failover)
        moved = partition(cluster)
        assert moved.leader == new and moved.leader_epoch > old_epoch
        eventually(lambda: segments_of(cluster, leader) == [], 30, "the old leader's copy gone")


def test_bad_reassignments_get_kafkas_errors_and_change_nothing(tmp_path: Path) -> None:
    with running_cluster(tmp_path, f"sqlite://{tmp_path}/metastore.db") as cluster:
        cluster.create_topic(TOPIC, assignment=[[0, 1]])
        before = partition(cluster)
        client = admin(cluster)
        try:
            unknown = client.alter_partition_reassignments(
                {KpTopicPartition("absent", 0): [0, 1], KpTopicPartition(TOPIC, 5): [0, 1]}
            )
            assert set(unknown.values()) == {kafka.errors.UnknownTopicOrPartitionError}
            for bad in ([0, 7], [1, 1]):
                refused = reassign(cluster, bad, client)
                assert refused is kafka.errors.InvalidReplicationAssignmentError, bad
            assert reassign(cluster, None, client) is kafka.errors.NoReassignmentInProgressError
            assert ongoing(cluster, client) == {}
        finally:
            client.close()
        assert partition(cluster) == before
