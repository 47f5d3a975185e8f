"""SIGKILL the broker coordinating a group while its members commit: another broker
loads the group from the replicated ``__consumer_offsets``, no acknowledged commit is
lost, and the members carry on with it."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import pytest
from group_members import HANG_GUARD_S, GroupMember, committed, wait_for
from kafka.protocol.metadata import FindCoordinatorRequest

from cluster.cluster_harness import running_cluster
from epochlog.client.connection import BrokerConnection
from epochlog.seams.real import SocketNetwork
from support.clients import confluent_producer

PARTITIONS = 6


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


def produce(bootstrap: str, topic: str, per_partition: int, phase: int) -> None:
    producer = confluent_producer(bootstrap)
    for partition in range(PARTITIONS):
        for i in range(per_partition):
            producer.produce(topic, value=f"{phase}-{partition}-{i}".encode(), partition=partition)
    assert producer.flush(HANG_GUARD_S) == 0


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
        produce(cluster.bootstrap, topic, 10, phase=1)
        members = [
            GroupMember("confluent", cluster.bootstrap, group, topic, name) for name in "abc"
        ]
        for m in members:
            m.start()

        def read() -> set[tuple[int, int]]:
            return {x for m in members for x in m.consumed}

        wait_for(lambda: sorted(len(m.assigned) for m in members) == [2, 2, 2], "2/2/2")
        wait_for(lambda: len(read()) >= 60, "phase 1 read")

        node, port = coordinator_of(cluster.brokers[0].port, group)
        assert node >= 0
        # A member commits after it handles a record: the last commits may trail the read.
        expected = {p: (10, 0) for p in range(PARTITIONS)}
        wait_for(lambda: committed(port, group) == expected, "phase 1 commits")
        before = expected

        produce(cluster.bootstrap, topic, 10, phase=2)
        cluster.brokers[node].kill()  # while the members read and commit phase 2
        survivor = next(b for i, b in enumerate(cluster.brokers) if i != node)

        def moved() -> bool:
            new_node, _ = coordinator_of(survivor.port, group)
            return new_node not in (-1, node)

        wait_for(moved, "another broker to coordinate the group")
        new_node, new_port = coordinator_of(survivor.port, group)
        # No acknowledged commit was lost: the new coordinator has at least what the old
        # one had acknowledged.
        wait_for(lambda: set(committed(new_port, group)) == set(range(PARTITIONS)), "a load")
        loaded = committed(new_port, group)
        for partition, (offset, _) in before.items():
            assert loaded[partition][0] >= offset

        produce(cluster.live_bootstrap(), topic, 10, phase=3)
        wait_for(lambda: len(read()) >= 180, "every record read after the failover")
        wait_for(
            lambda: (
                {p: o for p, (o, _) in committed(new_port, group).items()}
                == dict.fromkeys(range(PARTITIONS), 30)
            ),
            "every position committed to the new coordinator",
        )
        assert sorted(len(m.assigned) for m in members) == [2, 2, 2]
        for m in members:
            m.stop()
        seen = Counter(x for m in members for x in m.consumed)
        for partition in range(PARTITIONS):
            assert {o for p, o in seen if p == partition} == set(range(30))
        assert new_node != node
