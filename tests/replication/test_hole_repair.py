"""A follower repairs a hole in its log (``storage/log_holes.py``) from its leader, in
place and byte for byte, without the leader taking the repair for its progress; an
answer that shows the leader's log differs there truncates to the hole's start; a
leader with a hole keeps its log and hands leadership to the rest of its ISR."""

from __future__ import annotations

import uuid
from pathlib import Path
from types import SimpleNamespace

from replication_cluster import Cluster, eventually, produce_to, run

from epochlog.metadata.model import PartitionState
from epochlog.protocol.batch import HEADER_SIZE
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.records import build_batch
from epochlog.replication.hole_repair import apply_repair
from epochlog.replication.partition import Partition
from epochlog.seams.real import OsDisk
from epochlog.storage.config import LogConfig
from epochlog.storage.log import Log
from epochlog.storage.segment import DamagedBatch
from support.segments import batch_spans, flip_bytes

SEGMENT = {"segment.bytes": "2000"}


def _batches_of(log: Log) -> list[bytes]:
    """Every batch of a log as its bytes on disk, oldest first."""
    out = []
    for segment in log.segments:
        data = segment.file.pread(segment.size, 0)
        out += [data[s.position : s.position + s.size] for s in batch_spans(Path(segment.log_path))]
    return out


def _damage_first_segment(log: Log, which: int = 3) -> tuple[int, int]:
    """Flip bytes in a batch of the first segment and let a read's check find it, as
    the scrubber would on a follower; returns the batch's (position, base offset)."""
    segment = log.segments[0]
    span = batch_spans(Path(segment.log_path))[which]
    flip_bytes(Path(segment.log_path), span.position + HEADER_SIZE + 3, 4)
    log.damage_found(DamagedBatch(segment, span.position, "flipped by the test"), "test")
    return span.position, span.base_offset


def test_follower_fills_a_hole_from_its_leader_byte_for_byte(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with Cluster(tmp_path) as cluster:
            cluster.create("t", leader=0, **SEGMENT)
            leader, follower = cluster.nodes[0], cluster.nodes[2]
            for i in range(40):
                answer = await produce_to(leader, [b"value-%d-%d" % (i, j) for j in range(3)])
                assert answer.error_code == 0
            await eventually(
                lambda: (
                    _batches_of(follower.partition().log) == _batches_of(leader.partition().log)
                ),
                "follower caught up",
            )
            plog = follower.partition().log
            segments = list(plog.segments)
            assert len(segments) > 2
            end, high_watermark = plog.log_end_offset, leader.partition().high_watermark
            position, base = _damage_first_segment(plog)
            hole = plog.holes.first()
            assert hole is not None and (hole.position, hole.first_offset) == (position, base)
            assert plog.log_end_offset == end  # a hole leaves the log end where it was
            await eventually(lambda: not plog.holes, "the hole is filled")
            assert _batches_of(plog) == _batches_of(leader.partition().log)
            assert plog.segments == segments  # no segment was cut or replaced
            # The repair was a consumer's fetch: the leader's view of the follower, and
            # so its high watermark, never went back to the hole.
            assert leader.partition().followers[2].log_end_offset >= end
            assert leader.partition().high_watermark >= high_watermark
            (kept,) = plog.quarantine.list()
            assert kept["hole"] and kept["size"] == hole.end_position - position
            assert (await produce_to(leader, [b"after"])).error_code == 0

    run(scenario)


def test_follower_with_a_hole_made_leader_keeps_its_log_and_resigns_to_its_isr(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        async with Cluster(tmp_path) as cluster:
            cluster.create("t", leader=0, **SEGMENT)
            leader, successor = cluster.nodes[0], cluster.nodes[2]
            for i in range(40):
                assert (await produce_to(leader, [b"v%d" % i] * 3)).error_code == 0
            await eventually(
                lambda: successor.partition().high_watermark == 120, "successor knows the HW"
            )
            await leader.stop()
            plog = successor.partition().log
            _, base = _damage_first_segment(plog)
            assert plog.holes
            cluster.change(leader=2, isr=[1, 2])
            # It cannot serve the hole, and it does not cut there (node 1 holds every
            # record): its log and its epoch's start stay, and it asks to leave the ISR.
            assert plog.holes and plog.log_end_offset == 120
            assert successor.partition().leader_epoch_start_offset == 120
            await eventually(lambda: cluster.state().isr == [1], "successor resigned")
            assert [q for q in plog.quarantine.list() if not q.get("hole")] == []
            assert plog.holes.first().first_offset == base

    run(scenario)


class _Clock:
    def time_ms(self) -> int:
        return 1_700_000_000_000

    def monotonic(self) -> float:
        return 0.0


def _follower_with_hole(tmp_path: Path) -> tuple[Partition, list[bytes], int]:
    log = Log.open(OsDisk(), _Clock(), str(tmp_path / "t-0"), "t", 0, LogConfig(segment_bytes=2000))
    leader_copy = Log.open(
        OsDisk(), _Clock(), str(tmp_path / "leader" / "t-0"), "t", 0, LogConfig(segment_bytes=2000)
    )
    for i in range(30):
        data = bytearray(build_batch([(None, b"x%d" % i, [], 1000 + i)] * 2))
        leader_copy.append_as_leader(data, leader_epoch=0)
    for batch in _batches_of(leader_copy):
        log.append_as_follower(bytearray(batch))
    state = PartitionState(1, 0, [0, 1], [0, 1])
    partition = Partition("t", 0, uuid.uuid4(), log, state, local_broker_id=0)
    partition.apply_state(state)
    partition.update_follower_high_watermark(60)
    _, base = _damage_first_segment(log)
    return partition, _batches_of(leader_copy), base


def test_an_answer_showing_the_leaders_log_differs_truncates_to_the_holes_start(
    tmp_path: Path,
) -> None:
    partition, batches, base = _follower_with_hole(tmp_path)
    # The batch after the hole's instead of the hole's own.
    answer = SimpleNamespace(error_code=0, records=batches[4])
    hole = partition.log.holes.first()
    assert apply_repair(partition, hole, answer, leader_id=1) is True
    assert not partition.log.holes and partition.log.log_end_offset == base
    assert partition.high_watermark == base


def test_an_answer_that_may_come_right_later_leaves_the_hole(tmp_path: Path) -> None:
    partition, batches, base = _follower_with_hole(tmp_path)
    hole = partition.log.holes.first()
    for answer in (
        SimpleNamespace(error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER, records=None),
        SimpleNamespace(error_code=ErrorCode.KAFKA_STORAGE_ERROR, records=None),
        SimpleNamespace(error_code=ErrorCode.OFFSET_OUT_OF_RANGE, records=None),
        SimpleNamespace(error_code=0, records=b""),  # the leader's HW is below it yet
    ):
        assert apply_repair(partition, hole, answer, leader_id=1) is False
        assert partition.log.holes.first() is hole
    right = SimpleNamespace(error_code=0, records=b"".join(batches[3:6]))
    assert apply_repair(partition, hole, right, leader_id=1) is True
    assert not partition.log.holes and _batches_of(partition.log) == batches
    assert partition.log.log_end_offset == 60 and partition.high_watermark == 60
