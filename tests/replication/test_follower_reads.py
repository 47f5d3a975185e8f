"""KIP-392 on the broker, with brokers in one event loop and a stand-in controller that
decides which broker learns what when: a follower serves consumers (Fetch v11+) up to the
high watermark the leader propagated to it, never past it, after KIP-320's epoch checks
against what it knows; a broker that is no longer a replica answers NOT_LEADER_OR_FOLLOWER;
a rack-aware leader sends a consumer to the in-sync follower in its rack."""

from __future__ import annotations

import asyncio
from pathlib import Path

from replication_cluster import Cluster, Node, eventually, fetch_from, list_latest, produce_to, run

from epochlog.client.errors import TopicPartition
from epochlog.client.lookup import offsets_for_leader_epoch_request
from epochlog.protocol.errors import ErrorCode
from epochlog.settings.replica_selector import LEADER_SELECTOR, RACK_AWARE_SELECTOR
from support.records import values_of

RACKS = {0: "rack-a", 1: "rack-b", 2: "rack-c"}


async def end_of_epoch(node: Node, current_epoch: int, epoch: int) -> int:
    """The error of a consumer's OffsetsForLeaderEpoch v4 to ``node``."""
    conn = await node.connect()
    try:
        request = offsets_for_leader_epoch_request({TopicPartition("t", 0): (current_epoch, epoch)})
        response = await conn.send(request, 4)
        return int(response.topics[0].partitions[0].error_code)
    finally:
        await conn.close()


def test_a_follower_serves_consumers_up_to_its_high_watermark_and_never_past_it(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        async with Cluster(tmp_path) as cluster:
            cluster.create("t", leader=0)
            leader, follower, third = (cluster.nodes[i] for i in range(3))
            assert (await produce_to(leader, [b"a", b"b", b"c"])).error_code == 0
            await eventually(
                lambda: follower.partition().high_watermark == 3, "the follower learns HW 3"
            )
            # The third replica stops but stays in the ISR: the leader's high watermark
            # holds at 3 while the follower copies what comes next.
            await third.stop()
            assert (await produce_to(leader, [b"d", b"e"], acks=1)).error_code == 0
            await eventually(
                lambda: follower.partition().log_end_offset == 5, "the follower holds 5"
            )
            assert follower.partition().high_watermark == 3

            answer = await fetch_from(follower, 0)
            assert answer.error_code == ErrorCode.NONE
            assert values_of(answer.records) == [(0, b"a"), (1, b"b"), (2, b"c")]
            assert answer.high_watermark == 3
            assert answer.preferred_read_replica == -1
            at_hw = await fetch_from(follower, 3)
            assert (at_hw.error_code, values_of(at_hw.records)) == (ErrorCode.NONE, [])
            # Past its log end: out of range (the client goes back to the leader).
            beyond = await fetch_from(follower, 6)
            assert beyond.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
            # Before v11 a consumer carries no client metadata: the leader only.
            old = await fetch_from(follower, 0, version=10)
            assert old.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER

            # A consumer waiting at the follower's high watermark is answered when the
            # leader's next answer moves it (the third replica back, caught up).
            waiting = asyncio.ensure_future(fetch_from(follower, 3, max_wait_ms=20_000))
            await asyncio.sleep(0.1)
            assert not waiting.done()
            await third.start()
            cluster.publish("t", to=[2])
            answer = await waiting
            assert answer.error_code == ErrorCode.NONE
            assert values_of(answer.records) == [(3, b"d"), (4, b"e")]
            assert answer.high_watermark == 5

    run(scenario)


def test_a_follower_checks_a_consumers_leader_epoch_against_the_epoch_it_knows(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        async with Cluster(tmp_path) as cluster:
            cluster.create("t", leader=0)
            leader, follower = cluster.nodes[0], cluster.nodes[1]
            assert (await produce_to(leader, [b"a"])).error_code == 0
            await eventually(lambda: follower.partition().high_watermark == 1, "HW 1 there")
            # Epoch 1 reaches the leader and the third broker, not yet this follower.
            cluster.change(to=[0, 2], leader=0)
            newer = await fetch_from(follower, 0, current_epoch=1)
            assert newer.error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
            assert values_of(newer.records) == []
            same = await fetch_from(follower, 0, current_epoch=0)
            assert (same.error_code, values_of(same.records)) == (ErrorCode.NONE, [(0, b"a")])
            cluster.publish("t", to=[1])
            older = await fetch_from(follower, 0, current_epoch=0)
            assert older.error_code == ErrorCode.FENCED_LEADER_EPOCH
            assert (older.current_leader.leader_id, older.current_leader.leader_epoch) == (0, 1)
            assert values_of(older.records) == []
            current = await fetch_from(follower, 0, current_epoch=1)
            assert current.error_code == ErrorCode.NONE
            assert values_of(current.records) == [(0, b"a")]
            unchecked = await fetch_from(follower, 0, current_epoch=-1)
            assert unchecked.error_code == ErrorCode.NONE
            # ListOffsets and OffsetsForLeaderEpoch from consumers stay on the leader.
            assert (await list_latest(follower)).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
            assert await end_of_epoch(follower, 1, 0) == ErrorCode.NOT_LEADER_OR_FOLLOWER
            assert await end_of_epoch(leader, 1, 0) == ErrorCode.NONE

    run(scenario)


def test_a_broker_that_is_no_longer_a_replica_answers_not_leader_or_follower(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        async with Cluster(tmp_path) as cluster:
            cluster.create("t", leader=0)
            leader, follower = cluster.nodes[0], cluster.nodes[1]
            assert (await produce_to(leader, [b"a"])).error_code == 0
            assert (await fetch_from(follower, 0)).error_code == ErrorCode.NONE
            cluster.change(replicas=[0, 2], isr=[0, 2])
            gone = await fetch_from(follower, 0)
            assert gone.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
            assert values_of(gone.records) == []

    run(scenario)


def test_a_rack_aware_leader_sends_a_consumer_to_the_in_sync_follower_in_its_rack(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        settings = {"replica.selector.class": RACK_AWARE_SELECTOR}
        async with Cluster(tmp_path, racks=RACKS, **settings) as cluster:
            cluster.create("t", leader=0)
            leader = cluster.nodes[0]
            assert (await produce_to(leader, [b"a", b"b"])).error_code == 0
            sent = await fetch_from(leader, 0, rack_id="rack-b")
            assert (sent.error_code, sent.preferred_read_replica) == (ErrorCode.NONE, 1)
            assert values_of(sent.records) == []
            assert (sent.high_watermark, sent.log_start_offset) == (2, 0)
            for rack in ("rack-a", "", "rack-z"):
                kept = await fetch_from(leader, 0, rack_id=rack)
                assert kept.preferred_read_replica == -1, rack
                assert values_of(kept.records) == [(0, b"a"), (1, b"b")], rack
            # No follower holds offset 5: nobody is offered, and the leader answers it.
            beyond = await fetch_from(leader, 5, rack_id="rack-b")
            assert beyond.preferred_read_replica == -1
            assert beyond.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
            # A follower out of the ISR (marked offline, so it stays out) is not offered.
            cluster.change(isr=[0, 2], offline_replicas=[1])
            kept = await fetch_from(leader, 0, rack_id="rack-b")
            assert kept.preferred_read_replica == -1
            assert values_of(kept.records) == [(0, b"a"), (1, b"b")]
            assert (await fetch_from(leader, 0, rack_id="rack-c")).preferred_read_replica == 2

    run(scenario)


def test_the_leader_selector_keeps_every_consumer_on_the_leader(tmp_path: Path) -> None:
    async def scenario() -> None:
        settings = {"replica.selector.class": LEADER_SELECTOR}
        async with Cluster(tmp_path, racks=RACKS, **settings) as cluster:
            cluster.create("t", leader=0)
            leader = cluster.nodes[0]
            assert (await produce_to(leader, [b"a"])).error_code == 0
            kept = await fetch_from(leader, 0, rack_id="rack-b")
            assert kept.preferred_read_replica == -1
            assert values_of(kept.records) == [(0, b"a")]

    run(scenario)
