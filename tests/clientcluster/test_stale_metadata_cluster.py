"""KIP-232 and KIP-320's restart rule on a real 3-broker cluster (ZooKeeper metastore).

A broker that has not learnt a leader change is made real by a network partition
between it and ZooKeeper: broker X (the one the client asks first, lowest port) reaches
ZooKeeper through a TCP proxy that the test stops. X keeps serving clients from what it
knew, while the leadership of a partition moves from M to K by a controlled shutdown
of M:

- a consumer that already holds the new epoch refuses X's answer (logged), asks again
  with backoff, and goes on reading from the right leader;
- a consumer restarted from a committed position (``committed()``, with its epoch)
  whose epoch is the new one gets only X's old answer (it holds nothing yet to refuse
  it by) and does not validate against it: it waits until metadata reaches the
  position's epoch (X heals), then validates and reads on.

And a topic deleted and re-created under a running consumer is reported
(TopicIdChangedError naming its partitions), never read from the old offsets.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator

import pytest
from clientcluster_support import (
    CALL_BOUND_S,
    HoldingProxy,
    LogLines,
    LoopConsumer,
    Roles,
    keyed,
    produce,
    raised,
    read,
    start_ordered,
    wait_for,
)

from epochlog.client import OffsetAndEpoch, TopicIdChangedError, TopicPartition
from epochlog.client.positions import Phase
from support.zookeeper import ZooKeeperServer

BOUND_S = 120.0
CONSUMER = {"retry.backoff.ms": 50, "retry.backoff.max.ms": 500}
OFFSETS_TOPIC = "__consumer_offsets"
GROUP = "restarts"
# Sessions outlive the partition between X and ZooKeeper (a few seconds).
SESSION_MS = "30000"


@dataclasses.dataclass
class Lagging:
    roles: Roles
    proxy: HoldingProxy


@pytest.fixture(scope="module")
def lagging(
    tmp_path_factory: pytest.TempPathFactory, zookeeper: ZooKeeperServer
) -> Iterator[Lagging]:
    base = tmp_path_factory.mktemp("clientcluster-zk")
    chroot = f"/{base.name}"
    proxy = HoldingProxy(zookeeper.port)

    def through_proxy(roles: Roles) -> None:
        broker = roles.cluster.brokers[roles.first]
        broker.settings["metastore"] = f"zk://127.0.0.1:{proxy.port}{chroot}"

    roles = start_ordered(
        base,
        f"zk://127.0.0.1:{zookeeper.port}{chroot}",
        through_proxy,
        **{"zookeeper.session.timeout.ms": SESSION_MS},
    )
    try:
        yield Lagging(roles, proxy)
    finally:
        roles.cluster.close()
        proxy.close()


@pytest.fixture(scope="module")
def roles(lagging: Lagging) -> Roles:
    return lagging.roles


def metadata_leader(roles: Roles, topic: str, via: int) -> tuple[int, int]:
    p = roles.cluster.metadata(topic, via=via)["partitions"][0]
    return p.leader, p.leader_epoch


def test_lagging_broker_metadata_refused_and_restart_waits_for_its_epoch(
    lagging: Lagging,
) -> None:
    roles, proxy = lagging.roles, lagging.proxy
    cluster = roles.cluster
    x, m, k = roles.first, roles.middle, roles.controller
    topic = "moving"
    tp = TopicPartition(topic, 0)
    on_k = f"127.0.0.1:{cluster.brokers[k].port}"
    on_x = f"127.0.0.1:{cluster.brokers[x].port}"
    now = int(time.time() * 1000)
    cluster.create_topic(topic, assignment=[[m, k]])
    first = [(b"first-%d" % i, b"v", now + i) for i in range(5)]
    assert produce(cluster.bootstrap, topic, first) == list(range(5))
    wait_for(lambda: cluster.log_end_offset(k, topic) == 5, 60, "K to follow")
    wait_for(lambda: metadata_leader(roles, topic, x)[0] == m, 60, "X to know the topic")
    _, e0 = metadata_leader(roles, topic, x)
    # Commits go to a coordinator on K, which X knows of before it is cut off.
    cluster.create_topic(OFFSETS_TOPIC, assignment=[[k]], cleanup_policy="compact")
    wait_for(lambda: metadata_leader(roles, OFFSETS_TOPIC, x)[0] == k, 60, "X to know the offsets")

    proxy.hold()  # X no longer hears from ZooKeeper
    try:
        cluster.brokers[m].stop()  # controlled shutdown: K leads at a new epoch
        wait_for(lambda: metadata_leader(roles, topic, k)[0] == k, 60, "K to lead")
        _, e1 = metadata_leader(roles, topic, k)
        assert e1 > e0
        assert metadata_leader(roles, topic, x) == (m, e0)  # X lags, and answers so
        wait_for(lambda: cluster.list_offsets(k, topic).error == 0, 60, "K to serve")
        assert produce(on_k, topic, [(b"one", b"v", now + 5)]) == [5]

        with LogLines() as lines:
            # Learns e1 from K (its bootstrap); its next refreshes go to X first.
            holder = LoopConsumer(
                {"bootstrap.servers": on_k, "auto.offset.reset": "none", **CONSUMER}
                | {"metadata.max.age.ms": 0, "group.id": GROUP}
            )
            # Restarted from the holder's committed position; it knows only X.
            restarted = LoopConsumer(
                {"bootstrap.servers": on_x, "auto.offset.reset": "none", **CONSUMER}
                | {"group.id": GROUP}
            )
            try:
                holder.assign([tp])
                holder.seek(tp, 0)
                held_read = read(holder, 6)
                # Its refreshes (metadata.max.age.ms=0) now start with X, which lags.
                wait_for(
                    lambda: (
                        holder.poll(0.2) == []
                        and any(ln.startswith("refused stale metadata") for ln in lines.lines)
                    ),
                    60,
                    "the holder to refuse X's answer",
                )
                # The position after "one" (offset 5, epoch e1), committed with its epoch.
                holder.submit(lambda c: c.commit({tp: OffsetAndEpoch(6, e1)})).result(CALL_BOUND_S)
                restarted.assign([tp])
                committed = restarted.submit(lambda c: c.committed([tp])).result(CALL_BOUND_S)
                assert committed == {tp: OffsetAndEpoch(6, e1)}
                restarted.seek(tp, committed[tp].offset, committed[tp].leader_epoch)
                for _ in range(3):
                    assert restarted.poll(0.2) == []
                    # What it stands on: X's epoch e0, the stale leader M still named
                    # (a request to M, which is down, would have dropped it): waiting.
                    look = restarted.call(
                        lambda: dataclasses.replace(restarted.consumer._positions[tp])
                    )
                    assert look.phase is Phase.AWAIT_VALIDATION, look
                    assert (look.leader, look.leader_epoch) == (m, e0), look
                    assert (look.offset, look.offset_epoch) == (6, e1), look
                    assert not look.can_validate()
                proxy.release()
                wait_for(lambda: metadata_leader(roles, topic, x) == (k, e1), 60, "X to catch up")
                assert produce(on_k, topic, [(b"after", b"v", now + 6)]) == [6]
                held_read += read(holder, 1)
                restarted_read = read(restarted, 1)
                look = restarted.call(
                    lambda: dataclasses.replace(restarted.consumer._positions[tp])
                )
            finally:
                holder.close()
                restarted.close()
    finally:
        proxy.release()

    # The holder refused X's answer, asked again, and read everything from K.
    refusals = [ln for ln in lines.lines if ln.startswith("refused stale metadata")]
    assert refusals, lines.lines
    assert f"refused stale metadata ({tp} epoch {e0} < held {e1}); asking again" in refusals
    assert keyed(held_read) == [(i, b"first-%d" % i, e0) for i in range(5)] + [
        (5, b"one", e1),
        (6, b"after", e1),
    ]
    # Once metadata reached e1 it validated (no truncation: policy none would raise)
    # and read exactly what followed the committed position, from K.
    assert keyed(restarted_read) == [(6, b"after", e1)]
    assert (look.leader, look.leader_epoch, look.phase) == (k, e1, Phase.FETCHING)


def test_recreated_topic_is_reported_not_read_from_old_offsets(roles: Roles) -> None:
    cluster = roles.cluster
    k = roles.controller
    on_k = f"127.0.0.1:{cluster.brokers[k].port}"
    topic = "recreated"
    tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    now = int(time.time() * 1000)
    cluster.create_topic(topic, assignment=[[k], [k]])
    for p in (0, 1):
        produce(on_k, topic, [(b"old-%d" % i, b"v", now) for i in range(3)], partition=p)
    consumer = LoopConsumer(
        {"bootstrap.servers": on_k, "auto.offset.reset": "earliest", **CONSUMER}
    )
    try:
        consumer.assign(tps)
        assert sorted((r.partition, r.key) for r in read(consumer, 6)) == sorted(
            (p, b"old-%d" % i) for p in (0, 1) for i in range(3)
        )
        admin = cluster.admin()
        admin.delete_topics([topic], operation_timeout=30)[topic].result(60)
        wait_for(lambda: cluster.metadata(topic, via=k)["error"] != 0, 60, "the topic to be gone")
        # Same name, same leader, same epoch: only the topic ID tells them apart.
        cluster.create_topic(topic, assignment=[[k], [k]])
        for p in (0, 1):
            produce(on_k, topic, [(b"new-%d" % i, b"v", now) for i in range(6)], partition=p)
        error = raised(consumer, TopicIdChangedError, BOUND_S)
        assert error.partitions == tps
        assert f"partitions in use: {topic}-0, {topic}-1" in str(error)
        # It stays reported: the consumer never reads the new topic from old offsets.
        assert isinstance(raised(consumer, TopicIdChangedError, BOUND_S), TopicIdChangedError)
        # The application assigns afresh: the new topic is read from its start.
        consumer.assign([])
        consumer.assign(tps)
        assert sorted((r.partition, r.offset, r.key) for r in read(consumer, 12)) == sorted(
            (p, i, b"new-%d" % i) for p in (0, 1) for i in range(6)
        )
    finally:
        consumer.close()
