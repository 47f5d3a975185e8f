"""Three epochlog members on a 3-broker cluster: SIGKILL the broker coordinating their
group (and leading some partitions). The members find the new coordinator (another
broker loads the group from the replicated __consumer_offsets), validate their
positions against the new leaders, read every record, and their last commits carry
the new leader epochs."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from kafka.protocol.metadata import FindCoordinatorRequest

from cluster.cluster_harness import running_cluster
from epochlog.client import Admin, TopicPartition
from epochlog.client.connection import BrokerConnection
from epochlog.seams.real import SocketNetwork
from support.member_threads import (
    PARTITIONS,
    GroupMember,
    committed,
    distinct,
    produce,
    spread,
    stop_all,
    wait_for,
)


@pytest.mark.crash
def test_members_follow_the_coordinator_and_leaders_after_a_sigkill(tmp_path: Path) -> None:
    settings = {
        "offsets.topic.num.partitions": "3",
        "offsets.topic.replication.factor": "3",
        "group.initial.rebalance.delay.ms": "0",
    }
    with running_cluster(tmp_path, f"sqlite://{tmp_path}/metastore.db", **settings) as cluster:
        topic, group = "failover", "epochlog-failover"
        cluster.create_topic(topic, PARTITIONS, 3)
        produce(cluster.bootstrap, topic, 10, phase=1)
        members = [GroupMember("epochlog", cluster.bootstrap, group, topic, n) for n in "abc"]
        try:
            for m in members:
                m.start()
            wait_for(lambda: spread(members) == [2, 2, 2], "a 2/2/2 group", members)
            wait_for(lambda: len(distinct(members)) >= 60, "phase 1 read", members)

            with Admin({"bootstrap.servers": cluster.bootstrap}) as admin:
                info = admin.describe_cluster([topic])
            led_by = {p.partition: p.leader for p in info.topics[topic].partitions}
            node = _coordinator(cluster.bootstrap, group)
            cluster.kill(node)
            moved = sorted(p for p, leader in led_by.items() if leader == node)

            produce(cluster.live_bootstrap(), topic, 10, phase=2)
            wait_for(lambda: len(distinct(members)) >= 120, "every record read", members)
            wait_for(lambda: spread(members) == [2, 2, 2], "the group stable again", members)
            # The admin client copes with the killed broker while it is still listed.
            with Admin({"bootstrap.servers": cluster.live_bootstrap()}) as admin:
                assert group in [g.group_id for g in admin.list_groups()]
                described = admin.describe_groups([group])[group]
                assert described.state == "Stable" and len(described.members) == 3
                assigned = sorted(tp for m in described.members for tp in m.assignment)
                assert assigned == [TopicPartition(topic, p) for p in range(PARTITIONS)]
            for m in members:
                m.stop()
            assert distinct(members) == {(p, o) for p in range(PARTITIONS) for o in range(20)}
            found = committed(cluster.live_bootstrap(), group, topic)
            assert {tp: at.offset for tp, at in found.items()} == {
                TopicPartition(topic, p): 20 for p in range(PARTITIONS)
            }
            # Records of phase 2 on moved partitions were written by the new leaders.
            for p in moved:
                assert found[TopicPartition(topic, p)].leader_epoch >= 1
            assert _coordinator(cluster.live_bootstrap(), group) != node
        finally:
            stop_all(members)


def _coordinator(bootstrap: str, group: str) -> int:
    """The broker id coordinating ``group``, as FindCoordinator answers."""
    host, _, port = bootstrap.split(",")[0].rpartition(":")

    async def ask() -> int:
        conn = await BrokerConnection.open(SocketNetwork(), host, int(port))
        try:
            request = FindCoordinatorRequest(key_type=0, coordinator_keys=[group])
            (answer,) = (await conn.send(request, 4)).coordinators
            return answer.node_id if answer.error_code == 0 else -1
        finally:
            await conn.close()

    return asyncio.run(ask())
