"""Exactly one controller at a time; when it dies another takes over at a higher
controller epoch, and the cluster keeps electing leaders."""

from __future__ import annotations

from pathlib import Path

from cluster_harness import eventually, running_cluster


def test_sigkill_of_controller_elects_another_with_higher_epoch(
    tmp_path: Path, metastore_uri: str
) -> None:
    with running_cluster(tmp_path, metastore_uri) as cluster:
        cluster.create_topic("before", partitions=3, replication=3)
        first = cluster.controller_id()
        first_epoch = cluster.controller_epoch()
        cluster.brokers[first].kill()
        eventually(lambda: cluster.controller_id() not in (-1, first), 30, "a new controller")
        assert cluster.controller_epoch() > first_epoch
        # Partitions the dead broker led move to live ISR members.
        eventually(
            lambda: all(
                p.leader not in (-1, first) for p in cluster.metadata("before")["partitions"]
            ),
            30,
            "leaders away from the killed controller",
        )
        # The new controller keeps electing: a new topic gets leaders.
        cluster.create_topic("after", partitions=2, replication=2)
        assert all(p.leader >= 0 for p in cluster.metadata("after")["partitions"])


def test_recreated_topic_has_a_new_topic_id(tmp_path: Path, metastore_uri: str) -> None:
    with running_cluster(tmp_path, metastore_uri) as cluster:
        cluster.create_topic("again", partitions=2, replication=3)
        first_id = cluster.metadata("again")["topic_id"]
        admin = cluster.admin()
        admin.delete_topics(["again"], operation_timeout=30)["again"].result(60)
        eventually(lambda: cluster.metadata("again")["error"] == 3, 30, "topic gone everywhere")
        cluster.create_topic("again", partitions=2, replication=3)
        for broker in range(3):
            eventually(
                lambda b=broker: (
                    cluster.metadata("again", via=b)["topic_id"] not in (None, first_id)
                    and cluster.metadata("again", via=b)["error"] == 0
                ),
                30,
                f"broker {broker} to know the new topic id",
            )
