"""Three replica managers replicating over loopback through the real request handlers,
with the test acting as the controller (and choosing who learns a new state when)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from replication_cluster import (
    Cluster,
    eventually,
    fetch_from,
    list_latest,
    produce_to,
    run,
    values_in,
)

from epochlog.protocol.errors import ErrorCode


def test_acks_all_is_answered_only_after_every_isr_follower_holds_the_records(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        async with Cluster(tmp_path) as cluster:
            cluster.create("t", leader=0, **{"min.insync.replicas": "2"})
            leader, f1, f2 = (cluster.nodes[i] for i in range(3))
            answer = await produce_to(leader, [b"a", b"b", b"c"])
            assert (answer.error_code, answer.base_offset) == (0, 0)
            # Acknowledged means committed: both followers appended them already.
            assert leader.partition().high_watermark >= 3
            assert f1.partition().log.log_end_offset >= 3
            assert f2.partition().log.log_end_offset >= 3
            expected = [(0, b"a"), (1, b"b"), (2, b"c")]
            assert values_in(f1.partition().log) == expected
            assert values_in(f2.partition().log) == expected
            # Followers learn the high watermark from later fetch answers.
            await eventually(
                lambda: f1.partition().high_watermark == 3 == f2.partition().high_watermark,
                "followers learn HW 3",
            )
            consumed = await fetch_from(leader, 0)
            assert consumed.error_code == 0 and consumed.high_watermark == 3

    run(scenario)


def test_acks_all_needs_min_insync_replicas(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with Cluster(tmp_path) as cluster:
            cluster.create("t", leader=0, isr=[0], **{"min.insync.replicas": "2"})
            # Both followers marked offline (before any of them could fetch): never added.
            cluster.change(offline_replicas=[1, 2])
            refused = await produce_to(cluster.nodes[0], [b"x"])
            assert refused.error_code == ErrorCode.NOT_ENOUGH_REPLICAS
            assert cluster.nodes[0].partition().log.log_end_offset == 0
            await eventually(
                lambda: (
                    cluster.nodes[1].partition().followers == {}
                    and cluster.nodes[0].partition().followers[1].fetch_epoch == 0
                ),
                "broker 1 fetches",
            )
            assert cluster.state().isr == [0] and cluster.proposals == []
            # Back online: the followers are added through the controller; then it works.
            cluster.change(offline_replicas=[])
            await eventually(lambda: len(cluster.state().isr) == 3, "ISR expands to 3")
            assert all(accepted for _, _, accepted in cluster.proposals)
            answer = await produce_to(cluster.nodes[0], [b"y"])
            assert answer.error_code == 0
            acks1 = await produce_to(cluster.nodes[1], [b"z"], acks=1)
            assert acks1.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER

    run(scenario)


def test_new_leader_makes_the_old_one_truncate_its_diverged_suffix_into_quarantine(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        async with Cluster(tmp_path) as cluster:
            cluster.create("t", leader=0)
            n0, n1, n2 = (cluster.nodes[i] for i in range(3))
            assert (await produce_to(n0, [b"a", b"b"])).error_code == 0
            # Broker 1 leads epoch 1; broker 0 has not heard of it and still leads epoch 0.
            cluster.change(leader=1, isr=[1, 2], to=[1, 2])
            stale = await produce_to(n0, [b"s1", b"s2", b"s3"], acks=1)
            assert (stale.error_code, stale.base_offset) == (0, 2)
            fresh = await produce_to(n1, [b"x"], acks=1)
            assert (fresh.error_code, fresh.base_offset) == (0, 2)
            assert n0.partition().log.log_end_offset == 5
            cluster.publish("t", to=[0])
            await eventually(
                lambda: values_in(n0.partition().log) == [(0, b"a"), (1, b"b"), (2, b"x")],
                "broker 0 truncated and refetched",
            )
            (kept,) = n0.partition().log.quarantine.list()
            assert (kept["first_offset"], kept["last_offset"], kept["epochs"]) == (2, 4, [0])
            assert n1.partition().log.quarantine.list() == []
            await eventually(
                lambda: values_in(n2.partition().log) == values_in(n1.partition().log),
                "broker 2 follows broker 1",
            )

    run(scenario)


def test_deposed_leader_never_acknowledges_acks_all(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with Cluster(tmp_path) as cluster:
            cluster.create("t", leader=0, **{"min.insync.replicas": "2"})
            n0, n1 = cluster.nodes[0], cluster.nodes[1]
            assert (await produce_to(n0, [b"a"])).error_code == 0
            # As after a SIGSTOP: leadership moved while broker 0 was not listening.
            cluster.change(leader=1, isr=[1, 2], to=[1, 2])
            timed_out = await produce_to(n0, [b"stale"], timeout_ms=300)
            assert timed_out.error_code == ErrorCode.REQUEST_TIMED_OUT
            assert n0.partition().high_watermark == 1
            # Waiting when the new state arrives: answered NOT_LEADER_OR_FOLLOWER.
            waiting = asyncio.ensure_future(produce_to(n0, [b"stale2"], timeout_ms=30_000))
            await eventually(lambda: n0.partition().log.log_end_offset == 3, "stale append")
            cluster.publish("t", to=[0])
            assert (await waiting).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
            await eventually(
                lambda: values_in(n0.partition().log) == [(0, b"a")], "stale writes truncated"
            )
            (kept,) = n0.partition().log.quarantine.list()
            assert (kept["first_offset"], kept["last_offset"]) == (1, 2)
            # Its ISR proposals carry a stale partition epoch and are refused.
            assert n1.partition().is_leader
            assert (await produce_to(n1, [b"b"])).error_code == 0

    run(scenario)


def test_followers_refetch_after_the_leader_restarts(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with Cluster(tmp_path) as cluster:
            cluster.create("t", leader=0)
            n0, n1, n2 = (cluster.nodes[i] for i in range(3))
            assert (await produce_to(n0, [b"a"])).error_code == 0
            await n0.stop()
            await asyncio.sleep(0.2)  # followers see their connections fail and back off
            await n0.start()  # a new port: followers find it again through endpoint_of
            cluster.publish("t", to=[0])
            answer = await produce_to(n0, [b"b"])
            assert (answer.error_code, answer.base_offset) == (0, 1)
            assert values_in(n1.partition().log) == [(0, b"a"), (1, b"b")]
            assert values_in(n2.partition().log) == [(0, b"a"), (1, b"b")]

    run(scenario)


def test_replica_fetches_are_fenced_by_epoch_and_replica_set(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with Cluster(tmp_path, size=3) as cluster:
            cluster.create("t", leader=0, isr=[0, 1, 2])
            cluster.change(leader=0, to=[0])  # broker 0 leads epoch 1; 1 and 2 lag behind
            n0 = cluster.nodes[0]
            codes = {}
            for epoch in (0, 1, 2):
                part = await fetch_from(n0, 0, replica_id=1, current_epoch=epoch)
                codes[epoch] = part.error_code
            assert codes == {
                0: ErrorCode.FENCED_LEADER_EPOCH,
                1: 0,
                2: ErrorCode.UNKNOWN_LEADER_EPOCH,
            }
            stranger = await fetch_from(n0, 0, replica_id=7, current_epoch=1)
            assert stranger.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
            to_follower = await fetch_from(cluster.nodes[1], 0, replica_id=2, current_epoch=0)
            assert to_follower.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
            # The fenced followers append nothing until they learn epoch 1, then catch up.
            assert (await produce_to(n0, [b"a"], acks=1)).error_code == 0
            cluster.publish("t", to=[1, 2])
            await eventually(
                lambda: all(cluster.nodes[i].partition().log.log_end_offset == 1 for i in (1, 2)),
                "followers catch up in epoch 1",
            )

    run(scenario)


def test_list_offsets_not_available_after_leader_change_then_never_smaller(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        async with Cluster(tmp_path) as cluster:
            cluster.create("t", leader=0)
            n0, n1, n2 = (cluster.nodes[i] for i in range(3))
            assert (await produce_to(n0, [b"a", b"b"])).error_code == 0
            before = await list_latest(n0)
            assert (before.error_code, before.offset) == (0, 2)
            await n2.stop()  # still in the ISR: nothing more can be committed
            assert (await produce_to(n0, [b"c", b"d", b"e"], acks=1)).error_code == 0
            await eventually(lambda: n1.partition().log.log_end_offset == 5, "1 replicates")
            assert (await list_latest(n0)).offset == 2
            cluster.change(leader=1)  # clean: 1 is in the ISR
            held = await list_latest(n1)
            assert held.error_code == ErrorCode.OFFSET_NOT_AVAILABLE
            replica = await list_latest(n1, replica_id=0)
            assert (replica.error_code, replica.offset) == (0, 5)
            await n2.start()
            cluster.publish("t", to=[2])
            answers = []

            async def available() -> bool:
                answer = await list_latest(n1)
                answers.append((answer.error_code, answer.offset))
                return answer.error_code == 0

            await eventually(available, "HW reaches the epoch start")
            assert answers[-1] == (0, 5)
            assert all(offset >= before.offset for code, offset in answers if code == 0)

    run(scenario)


def test_long_poll_at_the_high_watermark_wakes_when_it_moves(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with Cluster(tmp_path) as cluster:
            cluster.create("t", leader=0)
            n0 = cluster.nodes[0]
            assert (await produce_to(n0, [b"a"])).error_code == 0
            poll = asyncio.ensure_future(fetch_from(n0, 1, max_wait_ms=30_000))
            await asyncio.sleep(0.05)
            assert (await produce_to(n0, [b"b"])).error_code == 0
            # Bounded far below the 30 s long poll: woken by the HW move, not its timeout.
            part = await asyncio.wait_for(poll, 10)
            assert part.error_code == 0 and part.high_watermark == 2 and part.records

    run(scenario)


def test_dead_follower_leaves_the_isr_after_lag_time_and_acks_all_resumes(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        async with Cluster(tmp_path, **{"replica.lag.time.max.ms": "300"}) as cluster:
            cluster.create("t", leader=0, **{"min.insync.replicas": "2"})
            n0, n1, n2 = (cluster.nodes[i] for i in range(3))
            assert (await produce_to(n0, [b"a"])).error_code == 0
            await n2.stop()
            # Stuck while broker 2 is in the ISR; answered once the controller confirms
            # the leader's proposal to drop it.
            answer = await produce_to(n0, [b"b"])
            assert (answer.error_code, answer.base_offset) == (0, 1)
            assert cluster.state().isr == [0, 1]
            assert ([0, 1], True) in [(isr, ok) for _, isr, ok in cluster.proposals]
            assert n1.partition().log.log_end_offset == 2

    run(scenario)
