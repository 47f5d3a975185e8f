"""Followers fetch in incremental fetch sessions (KIP-227): one privileged session per
follower on its leader, answering only partitions with news, while acks=all and
KIP-320's epochs work as with full fetches."""

from __future__ import annotations

from pathlib import Path

from replication_cluster import Cluster, eventually, produce_to, run, values_in


def test_followers_replicate_through_one_privileged_session_each_across_epochs(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        async with Cluster(tmp_path) as cluster:
            cluster.create("t", leader=0, **{"min.insync.replicas": "3"})
            cluster.create("quiet", leader=0)
            leader, f1, f2 = (cluster.nodes[i] for i in range(3))
            assert (await produce_to(leader, [b"a", b"b"])).error_code == 0
            sessions = leader.fetch_sessions
            await eventually(lambda: len(sessions) == 2, "a session per follower")
            ids = {s.id for s in sessions.sessions()}
            for sid in ids:
                session = sessions.get(sid)
                assert session is not None and session.privileged
                assert sorted(name for name, _ in session.partitions) == ["quiet", "t"]
            # A new leader epoch on the same leader: the partition's fetch changes
            # (CurrentLeaderEpoch). A follower whose answer came for its old epoch
            # starts over with a full fetch, which closes its old session.
            cluster.change(leader=0)
            answer = await produce_to(leader, [b"c"])
            assert answer.error_code == 0
            for follower in (f1, f2):
                assert values_in(follower.partition().log) == [(0, b"a"), (1, b"b"), (2, b"c")]
                assert follower.partition().log.epoch_cache.latest_epoch == 1
            await eventually(
                lambda: f1.partition().high_watermark == 3 == f2.partition().high_watermark,
                "followers learn the high watermark from incremental answers",
            )
            assert len(sessions) == 2
            # Incremental fetches advance each session's epoch past the first.
            await eventually(
                lambda: all(s.epoch > 2 for s in sessions.sessions()),
                "incremental fetches",
            )

    run(scenario)
