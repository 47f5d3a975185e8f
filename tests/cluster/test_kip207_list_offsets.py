"""KIP-207: right after a leader change, a client's ListOffsets (latest) gets
OFFSET_NOT_AVAILABLE until the new leader's high watermark reaches the start of its
epoch; then an offset never smaller than one returned before the change.

Made deterministic: one follower is paused (still in the ISR) while records are written
with acks=1, so the old leader's high watermark stays behind its log end while the other
follower copies everything. Leadership then moves by controlled shutdown to that
follower, whose epoch starts at its log end, above the high watermark it knows; the
paused follower cannot fetch in the new epoch, so the high watermark cannot move until
it is resumed."""

from __future__ import annotations

from pathlib import Path

from cluster_harness import OffsetAnswer, eventually, running_cluster

TOPIC = "kip207"
OFFSET_NOT_AVAILABLE = 78
NOT_LEADER_OR_FOLLOWER = 6
FIRST = [(b"first-%d" % i, b"v") for i in range(5)]
SECOND = [(b"second-%d" % i, b"v") for i in range(5)]

SETTINGS = {
    # The paused follower must stay in the ISR (and registered) for the whole check.
    "replica.lag.time.max.ms": "20000",
    "zookeeper.session.timeout.ms": "10000",
}


def test_new_leader_answers_offset_not_available_then_never_a_smaller_offset(
    tmp_path: Path, metastore_uri: str
) -> None:
    with running_cluster(tmp_path, metastore_uri, **SETTINGS) as cluster:
        # The paused follower must not be the controller (a paused controller serves no
        # controlled shutdown); the controller is made the successor. A controlled
        # shutdown hands leadership to the first other ISR member, in replica order.
        successor = cluster.controller_id()
        old_leader, paused = [b for b in range(3) if b != successor]
        cluster.create_topic(TOPIC, assignment=[[old_leader, successor, paused]])
        leader, old_epoch = cluster.leader(TOPIC)
        assert leader == old_leader
        answers: list[OffsetAnswer] = []

        def latest(broker: int, **kw: int) -> OffsetAnswer:
            answers.append(cluster.list_offsets(broker, TOPIC, **kw))
            return answers[-1]

        assert cluster.produce(old_leader, TOPIC, FIRST) == (0, 0)
        assert latest(old_leader) == OffsetAnswer(0, len(FIRST), old_epoch)

        cluster.pause(paused)
        assert cluster.produce(old_leader, TOPIC, SECOND, acks=1) == (0, len(FIRST))
        end = len(FIRST) + len(SECOND)
        eventually(
            lambda: cluster.log_end_offset(successor, TOPIC) == end,
            30,
            "the successor to copy the acks=1 records",
        )
        # The paused ISR member holds the high watermark back on the old leader.
        assert latest(old_leader) == OffsetAnswer(0, len(FIRST), old_epoch)

        cluster.brokers[old_leader].stop()
        eventually(
            lambda: cluster.metadata(TOPIC, via=successor)["partitions"][0].leader == successor,
            30,
            "leadership to move to the successor",
        )
        new_epoch = cluster.metadata(TOPIC, via=successor)["partitions"][0].leader_epoch
        assert new_epoch > old_epoch
        eventually(
            lambda: latest(successor).error != NOT_LEADER_OR_FOLLOWER,
            30,
            "the successor to act as leader",
        )
        assert answers[-1].error == OFFSET_NOT_AVAILABLE, answers[-1]
        again = latest(successor, current_leader_epoch=new_epoch)
        assert again.error == OFFSET_NOT_AVAILABLE, again
        # Replicas and tools are never held back: they get the log end.
        for replica_id in (paused, -2):
            tool = cluster.list_offsets(successor, TOPIC, replica_id=replica_id)
            assert (tool.error, tool.offset) == (0, end), (replica_id, tool)

        cluster.resume(paused)
        eventually(lambda: latest(successor).error == 0, 60, "the offset to be available again")
        assert answers[-1] == OffsetAnswer(0, end, new_epoch)

        returned = [a.offset for a in answers if a.error == 0]
        assert returned == sorted(returned), f"offsets went backwards: {returned}"
        assert all(a.error in (0, OFFSET_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER) for a in answers)
