"""SIGTERM hands leadership away before a broker stops; ElectLeaders brings it back to
the preferred replica once that replica is in sync again."""

from __future__ import annotations

from pathlib import Path

from cluster_harness import eventually, running_cluster
from confluent_kafka import ElectionType, TopicPartition


def test_sigterm_moves_leadership_away_then_preferred_election_returns_it(
    tmp_path: Path, metastore_uri: str
) -> None:
    with running_cluster(tmp_path, metastore_uri) as cluster:
        cluster.create_topic("handover", partitions=1, replication=3)
        leader, epoch = cluster.leader("handover")
        stopping = cluster.brokers[leader]
        stopping.stop()  # SIGTERM, and asserts a clean exit 0
        assert "controlled shutdown complete" in stopping.output(since_last_start=True)
        # The new state was decided before the broker exited: no leaderless gap.
        eventually(lambda: cluster.leader("handover")[0] not in (leader, -1), 30, "a new leader")
        new_leader, new_epoch = cluster.leader("handover")
        assert new_leader not in (leader, -1) and new_epoch == epoch + 1
        assert leader not in cluster.metadata("handover")["partitions"][0].isr

        stopping.restart()
        eventually(
            lambda: leader in cluster.metadata("handover")["partitions"][0].isr,
            30,
            "the restarted broker to re-join the ISR",
        )
        preferred = cluster.metadata("handover")["partitions"][0]
        assert preferred.leader == new_leader  # nothing moves by itself (check interval 1h)
        admin = cluster.admin()
        future = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("handover", 0)])
        results = future.result(60)
        assert all(error is None for error in results.values()), results
        # Every broker learns the election in its own time (KIP-232's situation).
        eventually(
            lambda: cluster.leader("handover") == (leader, new_epoch + 1),
            30,
            "the preferred replica to lead again at the next epoch",
        )
