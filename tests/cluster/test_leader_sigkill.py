"""SIGKILL of a partition leader in the middle of a continuous acks=all produce from
confluent-kafka (idempotent, RF 3, min.insync.replicas 2): no acknowledged record is
lost or duplicated, and the new leader is announced at a higher leader epoch
(KIP-320/KIP-232 Metadata)."""

from __future__ import annotations

import time
from pathlib import Path

from cluster_harness import eventually, running_cluster
from continuous_producer import ContinuousProducer, check_log_holds_exactly_the_acknowledged

from support.clients import confluent_consume

TOPIC = "acked"
# Acknowledged records wanted before the kill and again after the new leader is known.
BEFORE_KILL = 3000
AFTER_ELECTION = 3000


def test_sigkill_of_leader_during_acks_all_produce_loses_no_acknowledged_record(
    tmp_path: Path, metastore_uri: str
) -> None:
    with running_cluster(tmp_path, metastore_uri) as cluster:
        cluster.create_topic(TOPIC, partitions=1, replication=3, min_insync_replicas="2")
        old_leader, old_epoch = cluster.leader(TOPIC)
        producer = ContinuousProducer(cluster.bootstrap, TOPIC).start()
        eventually(lambda: producer.acked() >= BEFORE_KILL, 60, "acks before the kill")

        cluster.brokers[old_leader].kill()
        killed_at = time.monotonic()

        def new_leader_known() -> bool:
            leader, epoch = cluster.leader(TOPIC)
            return leader not in (-1, old_leader) and epoch > old_epoch

        eventually(new_leader_known, 60, "a new leader")
        acked_at_election = producer.acked()
        eventually(
            lambda: producer.acked() >= acked_at_election + AFTER_ELECTION,
            60,
            "acks from the new leader",
        )
        reports = producer.stop()

        # Production really went on across the kill: acks from before and after it.
        assert any(d.at < killed_at for d in reports)
        assert sum(1 for d in reports if d.at > killed_at) >= AFTER_ELECTION

        # Every live broker announces the same new leader at a higher epoch (Metadata v12).
        new_leader, new_epoch = cluster.leader(TOPIC)
        assert new_leader != old_leader and new_epoch > old_epoch
        for broker in cluster.brokers:
            if broker.is_running():
                eventually(
                    lambda b=broker.broker_id: (
                        (
                            cluster.metadata(TOPIC, via=b)["partitions"][0].leader,
                            cluster.metadata(TOPIC, via=b)["partitions"][0].leader_epoch,
                        )
                        == (new_leader, new_epoch)
                    ),
                    30,
                    f"broker {broker.broker_id} to announce leader {new_leader}",
                )

        got = confluent_consume(cluster.live_bootstrap(), TOPIC)
        check_log_holds_exactly_the_acknowledged(reports, got)
