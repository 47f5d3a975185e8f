"""The KIP-320 model's invariants judged on snapshots, and KIP-207's on ListOffsets
answers: each names what breaks it, and only that."""

from __future__ import annotations

import pytest

from epochlog.metadata.model import PartitionState
from epochlog.sim.checkers import SNAPSHOT_INVARIANTS, check
from epochlog.sim.isr import (
    SNAPSHOT_CHECKERS,
    PartitionView,
    ReplicaView,
    leader_in_isr,
    offline_never_joins_isr,
    same_log_below,
    strong_isr,
    weak_isr,
)
from epochlog.sim.run import SimOptions, run_seed


def _replica(
    broker: int, leads: bool, epochs: tuple[tuple[int, int], ...], **kw: object
) -> ReplicaView:
    fields: dict[str, object] = dict(
        present=True, leader_epoch=2, isr=(0, 1, 2), high_watermark=10, log_start=0, log_end=12
    )
    fields.update(kw)
    return ReplicaView(broker, leads=leads, epochs=epochs, **fields)  # type: ignore[arg-type]


QUORUM = PartitionState(leader=0, leader_epoch=2, replicas=[0, 1, 2], isr=[0, 1, 2])
GOOD = ((0, 0), (2, 6))


def test_logs_are_the_same_below_an_offset_when_their_epochs_agree_there() -> None:
    a, b = _replica(0, True, GOOD), _replica(1, False, ((0, 0), (2, 8)))
    assert same_log_below(a, b, 6) and not same_log_below(a, b, 7)
    assert not same_log_below(a, _replica(1, False, GOOD, log_end=9), 10)


def test_a_healthy_partition_breaks_nothing() -> None:
    views = [PartitionView("t-0", QUORUM, (_replica(0, True, GOOD), _replica(1, False, GOOD)))]
    assert leader_in_isr(views) == weak_isr(views) == strong_isr(views) == []


def test_a_leader_outside_the_recorded_isr_breaks_leader_in_isr() -> None:
    quorum = PartitionState(leader=0, leader_epoch=2, replicas=[0, 1, 2], isr=[1, 2])
    views = [PartitionView("t-0", quorum, (_replica(0, True, GOOD),))]
    assert leader_in_isr(views) == [
        "t-0: leader 0 (epoch 2) not in [1, 2]",
        "t-0: b0 leads in epoch 2, ISR is [1, 2]",
    ]


def test_a_member_diverging_below_the_hw_breaks_weak_and_strong_isr() -> None:
    diverged = _replica(1, False, ((0, 0), (1, 4), (2, 6)))
    views = [PartitionView("t-0", QUORUM, (_replica(0, True, GOOD), diverged))]
    assert len(weak_isr(views)) == len(strong_isr(views)) == 1
    # Not present (restarted, not yet taken in): not the replica the ISR names.
    absent = _replica(1, False, ((0, 0), (1, 4)), present=False)
    assert weak_isr([PartitionView("t-0", QUORUM, (_replica(0, True, GOOD), absent))]) == []


def test_list_offsets_going_backwards_is_caught() -> None:
    history = [
        ("offsets", "latest", 0, 5),
        ("offsets", "latest", 0, 7),
        ("offsets", "latest", 0, 6),
    ]
    history += [("offsets", "earliest", 0, 0)]
    assert check(history)["ListOffsetsMonotonic"] == ["partition 0: latest offset 6 after 7"]


def test_a_client_going_back_to_an_older_leader_epoch_is_caught() -> None:
    history = [("client-epoch", "consumer", "t-0", e) for e in (0, 2, 1, 3)]
    history.append(("client-epoch", "producer", "t-0", 0))
    assert check(history)["StaleMetadataNeverUsed"] == ["consumer: t-0 went back to epoch 1 from 2"]


def test_a_run_records_list_offsets_answers_and_judges_snapshots() -> None:
    result = run_seed(12, SimOptions(duration=8.0, faults=("kill",)))
    assert result.ok, result.findings
    kinds = {e[1] for e in result.history if e[0] == "offsets"}
    assert kinds == {"earliest", "latest"}
    clients = {e[1] for e in result.history if e[0] == "client-epoch"}
    assert clients == {"producer", "consumer", "admin"}
    assert {*SNAPSHOT_INVARIANTS, "ListOffsetsMonotonic", "stalled"} <= set(result.findings)
    assert set(SNAPSHOT_INVARIANTS) == {*SNAPSHOT_CHECKERS, "OfflineNeverJoinsIsr"}


def test_a_high_watermark_that_runs_ahead_of_the_isr_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A planted bug: the leader's high watermark follows its own log end, whatever its
    followers hold. The snapshots see ISR members without what the HW covers."""
    from epochlog.replication.partition import Partition

    def ahead(self: Partition) -> bool:
        moved = self.is_leader and self.log.log_end_offset > self.high_watermark
        if moved:
            self.high_watermark = self.log.log_end_offset
        return moved

    monkeypatch.setattr(Partition, "maybe_advance_high_watermark", ahead)
    result = run_seed(3, SimOptions(duration=6.0, faults=()))
    broken = {name for name, found in result.findings.items() if found}
    assert {"WeakIsr", "StrongIsr"} <= broken, result.findings


def test_a_replica_joining_the_isr_while_listed_offline_is_caught() -> None:
    before = [PartitionView("t-0", state_with(isr=[0, 1], offline=[2]), ())]
    joined = [PartitionView("t-0", state_with(isr=[0, 1, 2], offline=[2]), ())]
    back = [PartitionView("t-0", state_with(isr=[0, 1, 2], offline=[]), ())]
    assert offline_never_joins_isr(before, joined) == [
        "t-0: b2 joined the ISR [0, 1, 2] while offline"
    ]
    assert offline_never_joins_isr(before, back) == []
    # A dead lone member staying in its ISR is no joining.
    assert offline_never_joins_isr(joined, joined) == []


def state_with(isr: list[int], offline: list[int]) -> PartitionState:
    return PartitionState(0, 2, [0, 1, 2], isr, offline_replicas=offline)
