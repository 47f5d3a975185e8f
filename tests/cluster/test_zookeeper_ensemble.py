"""Three brokers on a three-server ZooKeeper ensemble (Debian's zookeeper, loopback
ports, one connect string ``zk://h1:p1,h2:p2,h3:p3/chroot``) under a continuous acks=all
produce from confluent-kafka (idempotent, RF 3, min.insync.replicas 2):

1. SIGKILL of a ZooKeeper follower: the cluster keeps acknowledging and still writes
   to the metastore (a topic is created);
2. the follower back, SIGKILL of the ZooKeeper leader (found with ``srvr``): once the
   other two have elected a new leader the cluster keeps acknowledging, and a SIGKILL of
   the partition's leader broker still elects a new partition leader;
3. a broker paused (SIGSTOP) past its ZooKeeper session: the others drop it; resumed,
   it registers again on a new session and catches up into the ISR;
4. two ZooKeeper servers paused: the quorum is lost for a moment, then comes back.

At the end no delivery failed and the log holds every acknowledged record once."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_harness import Cluster, eventually
from continuous_producer import ContinuousProducer, check_log_holds_exactly_the_acknowledged

from support.clients import confluent_consume
from support.zookeeper import ZooKeeperEnsemble

pytestmark = pytest.mark.long

TOPIC = "ensemble"
# Acknowledged records wanted after each fault, to show the cluster kept working.
PROGRESS = 1000
# Long enough to ride through a ZooKeeper leader election (a few ticks of 500 ms), as
# Kafka's 18 s default does; the pause of step 3 outlasts it.
SESSION_TIMEOUT_MS = 6000
BOUND_S = 90.0


@pytest.fixture
def ensemble(tmp_path: Path) -> Iterator[ZooKeeperEnsemble]:
    servers = ZooKeeperEnsemble(tmp_path / "zookeeper").start()
    try:
        yield servers
    finally:
        servers.stop()


def progress(producer: ContinuousProducer, what: str) -> None:
    """Until PROGRESS more records than now are acknowledged."""
    target = producer.acked() + PROGRESS
    eventually(lambda: producer.acked() >= target, BOUND_S, f"{PROGRESS} acks {what}")


def test_brokers_survive_losing_zookeeper_servers_and_their_sessions(
    tmp_path: Path, ensemble: ZooKeeperEnsemble
) -> None:
    cluster = Cluster(
        tmp_path,
        ensemble.uri("/epochlog"),
        3,
        {"zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS)},
    )
    with cluster:
        cluster.create_topic(TOPIC, partitions=1, replication=3, min_insync_replicas="2")
        producer = ContinuousProducer(cluster.bootstrap, TOPIC).start()
        progress(producer, "before any fault")

        # 1. A follower of the ensemble dies.
        follower = ensemble.with_mode("follower")[0]
        follower.kill()
        progress(producer, "without a ZooKeeper follower")
        cluster.create_topic("after-follower-loss", partitions=1, replication=3)

        # 2. It comes back; then the ensemble's leader dies and the other two elect one.
        follower.launch()
        follower.wait_serving()
        (leader,) = ensemble.with_mode("leader")
        leader.kill()
        eventually(
            lambda: len(ensemble.with_mode("leader")) == 1, BOUND_S, "a new ZooKeeper leader"
        )
        progress(producer, "after the ZooKeeper leader's loss")
        old_leader, old_epoch = cluster.leader(TOPIC)
        cluster.kill(old_leader)
        eventually(
            lambda: (
                cluster.leader(TOPIC)[0] not in (-1, old_leader)
                and cluster.leader(TOPIC)[1] > old_epoch
            ),
            BOUND_S,
            "a new partition leader",
        )
        progress(producer, "from the new partition leader")
        leader.launch()
        cluster.brokers[old_leader].start()
        leader.wait_serving()
        eventually(
            lambda: old_leader in cluster.metadata(TOPIC)["partitions"][0].isr,
            BOUND_S,
            f"broker {old_leader} back in the ISR",
        )

        # 3. A broker that leads nothing is paused past its session, then resumed.
        paused = next(
            b.broker_id for b in cluster.brokers if b.broker_id != cluster.leader(TOPIC)[0]
        )
        cluster.pause(paused)
        eventually(
            lambda: paused not in cluster.registered(via=cluster.leader(TOPIC)[0]),
            BOUND_S,
            f"broker {paused}'s session to expire",
        )
        progress(producer, f"without broker {paused}")
        cluster.resume(paused)
        eventually(
            lambda: paused in cluster.registered(via=cluster.leader(TOPIC)[0]),
            BOUND_S,
            f"broker {paused} to register again",
        )
        eventually(
            lambda: paused in cluster.metadata(TOPIC)["partitions"][0].isr,
            BOUND_S,
            f"broker {paused} to catch up into the ISR",
        )

        # 4. Two servers paused: no quorum for a moment; then all three serve again.
        lost = ensemble.servers[:2]
        for server in lost:
            server.pause()
        eventually(
            lambda: ensemble.servers[2].mode() == "",
            BOUND_S,
            "the third ZooKeeper server to stop serving without a quorum",
        )
        for server in lost:
            server.resume()
        for server in ensemble.servers:
            server.wait_serving()
        progress(producer, "after the quorum came back")

        reports = producer.stop()
        got = confluent_consume(cluster.live_bootstrap(), TOPIC)
        check_log_holds_exactly_the_acknowledged(reports, got)
        assert len(got) >= 6 * PROGRESS
        # Every loss above is one a broker must handle: none may end in an error line
        # (a watch's re-read cut off by the session's expiry once did).
        for broker in cluster.brokers:
            errors = [line for line in broker.output().splitlines() if "level=error" in line]
            assert not errors, f"broker {broker.broker_id} logged errors: {errors[:3]}"
