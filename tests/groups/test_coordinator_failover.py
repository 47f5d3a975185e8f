"""SIGKILL the broker coordinating a group while its members commit: another broker
loads the group from the replicated ``__consumer_offsets``, no acknowledged commit is
lost, and the members carry on with it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from kafka.protocol.metadata import FindCoordinatorRequest

from cluster.cluster_harness import running_cluster
from epochlog.client.connection import BrokerConnection
from epochlog.seams.real import SocketNetwork
from support.member_threads import (
    PARTITIONS,
    GroupMember,
    counted,
    distinct,
    offset_fetch,
    produce,
    spread,
    wait_for,
)


def coordinator_of(port: int, group: str) -> tuple[int, int]:
    """(node id, port) of the group's coordinator as a broker answers FindCoordinator."""

    async def ask() -> tuple[int, int]:
        conn = await BrokerConnection.open(SocketNetwork(), "127.0.0.1", port)
        try:
            response = await conn.send(FindCoordinatorRequest(key=group, key_type=0), 3)
        finally:
            await conn.close()
        return (response.node_id, response.port) if response.error_code == 0 else (-1, -1)

    return asyncio.run(ask())


@pytest.mark.crash
def test_coordinator_sigkill_moves_the_group_without_losing_commits(tmp_path: Path) -> None:
    settings = {
        "offsets.topic.num.partitions": "3",
        "offsets.topic.replication.factor": "3",
        "group.initial.rebalance.delay.ms": "0",
    }
    with running_cluster(tmp_path, f"sqlite://{tmp_path}/metastore.db", **settings) as cluster:
        topic, group = "failover", "failover-group"
        cluster.create_topic(topic, PARTITIONS, 3)
        produce(cluster.bootstrap, topic, 10, phase=1, client="confluent")
        members = [
            GroupMember("confluent", cluster.bootstrap, group, topic, n, commit_each_record=True)
            for n in "abc"
        ]
        for m in members:
            m.start()

        wait_for(lambda: spread(members) == [2, 2, 2], "2/2/2", members)
        wait_for(lambda: len(distinct(members)) >= 60, "phase 1 read", members)

        node, port = coordinator_of(cluster.brokers[0].port, group)
        assert node >= 0
        # A member commits after it handles a record: the last commits may trail the read.
        expected = {p: (10, 0) for p in range(PARTITIONS)}
        wait_for(lambda: offset_fetch(port, group) == expected, "phase 1 commits")
        before = expected

        produce(cluster.bootstrap, topic, 10, phase=2, client="confluent")
        cluster.brokers[node].kill()  # while the members read and commit phase 2
        survivor = next(b for i, b in enumerate(cluster.brokers) if i != node)

        def moved() -> bool:
            new_node, _ = coordinator_of(survivor.port, group)
            return new_node not in (-1, node)

        wait_for(moved, "another broker to coordinate the group")
        new_node, new_port = coordinator_of(survivor.port, group)
        # No acknowledged commit was lost: the new coordinator has at least what the old
        # one had acknowledged.
        wait_for(lambda: set(offset_fetch(new_port, group)) == set(range(PARTITIONS)), "a load")
        loaded = offset_fetch(new_port, group)
        for partition, (offset, _) in before.items():
            assert loaded[partition][0] >= offset

        produce(cluster.live_bootstrap(), topic, 10, phase=3, client="confluent")
        wait_for(
            lambda: len(distinct(members)) >= 180, "every record read after the failover", members
        )
        wait_for(
            lambda: (
                {p: o for p, (o, _) in offset_fetch(new_port, group).items()}
                == dict.fromkeys(range(PARTITIONS), 30)
            ),
            "every position committed to the new coordinator",
        )
        assert spread(members) == [2, 2, 2]
        for m in members:
            m.stop()
        seen = counted(members)
        for partition in range(PARTITIONS):
            assert {o for p, o in seen if p == partition} == set(range(30))
        assert new_node != node
