"""Moving a follower's replica between its broker's log dirs while the leader takes
acks=all appends and the follower keeps fetching: the move ends in the new dir with the
leader's records exactly, and a move given up before it ran leaves nothing behind."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

from replication_cluster import Cluster, eventually, fetch_from, produce_to, run, values_in

from epochlog.protocol.errors import ErrorCode
from support.failing_disk import FailingDisk


def test_a_follower_moved_while_it_fetches_holds_the_leaders_records_in_its_new_dir(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        async with Cluster(tmp_path, log_dirs=2, **{"replica.fetch.max.bytes": "512"}) as cluster:
            cluster.create("t", leader=0)
            leader, follower, other = (cluster.nodes[i] for i in range(3))
            for i in range(20):
                assert (await produce_to(leader, [b"before-%d" % i] * 5)).error_code == 0
            source, target = follower.log_dirs
            assert follower.log_manager.dir_of("t", 0) == source

            other.replica_manager.alter_log_dir("t", 0, other.log_dirs[1])
            other.replica_manager.alter_log_dir("t", 0, other.log_dirs[0])  # given up
            assert other.log_manager.future_log("t", 0) is None
            other.log_manager.deferred_deletes.run_now()  # its copy's removal, off the loop
            assert not list(Path(other.log_dirs[1]).glob("t-0*"))

            follower.replica_manager.alter_log_dir("t", 0, target)

            async def keep_producing() -> None:
                for i in range(40):
                    assert (await produce_to(leader, [b"during-%d" % i] * 5)).error_code == 0

            producing = asyncio.ensure_future(keep_producing())
            await eventually(
                lambda: follower.log_manager.dir_of("t", 0) == target, "the follower's swap"
            )
            await producing
            assert follower.log_manager.future_log("t", 0) is None
            assert follower.partition().log.directory == f"{target}/t-0"
            await eventually(
                lambda: values_in(follower.partition().log) == values_in(leader.partition().log),
                "the moved follower holding the leader's records",
            )
            assert len(values_in(follower.partition().log)) == 300

    run(scenario)


def test_a_leader_whose_log_dir_is_offline_at_start_hands_leadership_to_its_isr(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        async with Cluster(tmp_path, log_dirs=2) as cluster:
            cluster.create("t", leader=0)
            leader = cluster.nodes[0]
            assert (await produce_to(leader, [b"kept"])).error_code == 0
            await leader.stop()
            held = Path(leader.log_manager.dir_of("t", 0) or "")
            held.rename(tmp_path / "away")
            held.write_bytes(b"a file where a log dir should be")
            await leader.start()
            leader.replica_manager.hosted_at_start = {("t", 0)}
            cluster.publish("t", to=[0])

            assert leader.log_manager.offline_dirs == {str(held)}
            assert (await fetch_from(leader, 0)).error_code == ErrorCode.KAFKA_STORAGE_ERROR
            # Fetch v5 and older may not know that code: told to find the leader again.
            old_client = await fetch_from(leader, 0, version=5)
            assert old_client.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
            (online,) = leader.log_manager.online_dirs
            assert not list(Path(online).glob("t-0*"))  # never re-created empty
            await eventually(
                lambda: any(isr == [1, 2] and ok for _, isr, ok in cluster.proposals),
                "an ISR without the offline leader proposed",
            )

    run(scenario)


def test_a_log_dir_failing_while_serving_takes_only_its_partitions_offline(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        cluster = Cluster(tmp_path, log_dirs=2)
        disk = FailingDisk()
        cluster.nodes[0].seams = dataclasses.replace(cluster.nodes[0].seams, disk=disk)
        async with cluster:
            cluster.create("t", leader=0)
            cluster.create("u", leader=0)
            leader = cluster.nodes[0]
            dying, healthy = leader.log_dirs  # t went to the first, u to the other
            assert leader.log_manager.dir_of("u", 0) == healthy
            assert (await produce_to(leader, [b"before"])).error_code == 0

            disk.failed.add(dying)
            answer = await produce_to(leader, [b"lost?"])
            assert answer.error_code == ErrorCode.KAFKA_STORAGE_ERROR
            assert leader.log_manager.offline_dirs == {dying}
            assert (await fetch_from(leader, 0)).error_code == ErrorCode.KAFKA_STORAGE_ERROR
            await eventually(
                lambda: any(isr == [1, 2] and ok for _, isr, ok in cluster.proposals),
                "an ISR without the failed leader proposed",
            )
            assert (await produce_to(leader, [b"still"], topic="u")).error_code == 0
            cluster.publish("t", to=[0])  # a state arriving later re-creates nothing
            assert not list(Path(healthy).glob("t-0*"))
            disk.failed.clear()

    run(scenario)
