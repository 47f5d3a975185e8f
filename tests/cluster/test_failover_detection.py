"""How a broker's failure is noticed on the embedded SQLite metastore, `epochlog up`'s
default: a SIGKILLed leader's session ends at the next metastore
change poll of any live broker, long before its session could time out; a leader merely
stopped for 2 s (busy, or paused) keeps its session and its leadership."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from cluster_harness import Cluster, eventually, running_cluster

from epochlog.tools.local_cluster import UP_SESSION_TIMEOUT_MS

TOPIC = "t"


@contextmanager
def cluster_with_topic(tmp_path: Path, session_timeout_ms: int) -> Iterator[Cluster]:
    """Three brokers on the SQLite metastore and a topic of replication 3 on them."""
    settings = {"zookeeper.session.timeout.ms": str(session_timeout_ms)}
    with running_cluster(tmp_path, f"sqlite://{tmp_path}/metastore.db", **settings) as cluster:
        cluster.create_topic(TOPIC, partitions=1, replication=3, min_insync_replicas="2")
        yield cluster


def test_a_sigkilled_leader_is_replaced_long_before_its_session_could_time_out(
    tmp_path: Path,
) -> None:
    session_timeout_s = 300  # heartbeats every 100 s: none is what notices the death
    with cluster_with_topic(tmp_path, session_timeout_s * 1000) as cluster:
        leader, epoch = cluster.leader(TOPIC)
        cluster.kill(leader)

        def replaced() -> bool:
            new_leader, new_epoch = cluster.leader(TOPIC)
            return new_leader not in (-1, leader) and new_epoch > epoch

        eventually(replaced, session_timeout_s / 4, "a new leader")
        assert leader not in cluster.registered(via=cluster.leader(TOPIC)[0])


def test_a_leader_stopped_for_two_seconds_keeps_its_leadership(tmp_path: Path) -> None:
    with cluster_with_topic(tmp_path, UP_SESSION_TIMEOUT_MS) as cluster:
        leader, epoch = cluster.leader(TOPIC)
        cluster.pause(leader)
        time.sleep(2.0)
        cluster.resume(leader)
        # Past the moment its session would have ended, had the pause cost it.
        time.sleep(UP_SESSION_TIMEOUT_MS / 1000)
        assert cluster.leader(TOPIC) == (leader, epoch)
        assert cluster.registered(via=leader) == {0, 1, 2}
