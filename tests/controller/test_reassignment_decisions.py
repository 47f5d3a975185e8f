"""KIP-455 reassignment as the controller decides it: the union while it runs, completion
once the target is in sync, cancellation, and Kafka's errors for bad requests."""

from __future__ import annotations

from epochlog.controller.reassignment import cancelled, completed, refusal, started
from epochlog.metadata.model import PartitionState
from epochlog.protocol.errors import ErrorCode

LIVE = {0, 1, 2, 3}


def state(leader: int = 0, isr: list[int] | None = None) -> PartitionState:
    return PartitionState(
        leader=leader, leader_epoch=4, replicas=[0, 1, 2], isr=isr or [0, 1, 2], partition_epoch=9
    )


def test_start_makes_the_union_of_target_and_original_without_bumping_the_leader_epoch() -> None:
    new = started(state(), [1, 2, 3], LIVE)
    assert new is not None
    assert (new.replicas, new.adding_replicas, new.removing_replicas) == ([1, 2, 3, 0], [3], [0])
    assert (new.leader, new.leader_epoch, new.partition_epoch) == (0, 4, 10)
    assert new.isr == [0, 1, 2]
    # As in Kafka, the original replicas are the union less the adding ones, in its order.
    assert (new.target_replicas, new.original_replicas) == ([1, 2, 3], [1, 2, 0])


def test_no_completion_until_every_adding_replica_is_in_the_isr() -> None:
    moving = started(state(), [1, 2, 3], LIVE)
    assert moving is not None
    assert completed(moving, LIVE) is None


def test_completion_moves_a_removed_leader_to_the_first_target_replica_at_a_new_epoch() -> None:
    moving = started(state(), [3, 2, 1], LIVE)
    assert moving is not None
    in_sync = PartitionState(**{**moving.__dict__, "isr": [0, 1, 2, 3]})
    done = completed(in_sync, LIVE)
    assert done is not None
    assert (done.replicas, done.isr, done.leader) == ([3, 2, 1], [1, 2, 3], 3)
    assert done.leader_epoch == 5 and not done.reassigning
    assert done.offline_replicas == []


def test_completion_keeping_the_leader_still_bumps_the_epoch_when_a_replica_leaves() -> None:
    moving = started(state(leader=1), [1, 2, 3], LIVE)
    assert moving is not None
    done = completed(PartitionState(**{**moving.__dict__, "isr": [1, 2, 0, 3]}), LIVE)
    assert done is not None
    assert (done.leader, done.leader_epoch, done.isr) == (1, 5, [1, 2, 3])


def test_adding_only_completes_without_a_leader_epoch_bump() -> None:
    moving = started(state(), [0, 1, 2, 3], LIVE)
    assert moving is not None and moving.removing_replicas == []
    done = completed(PartitionState(**{**moving.__dict__, "isr": [0, 1, 2, 3]}), LIVE)
    assert done is not None
    assert (done.replicas, done.leader_epoch) == ([0, 1, 2, 3], 4)


def test_cancel_reverts_to_the_original_replicas_and_drops_the_adding_ones() -> None:
    moving = started(state(), [1, 2, 3], LIVE)
    assert moving is not None
    back = cancelled(PartitionState(**{**moving.__dict__, "isr": [0, 1, 2, 3]}), LIVE)
    assert back is not None
    assert (back.replicas, back.isr, back.leader, back.leader_epoch) == ([1, 2, 0], [0, 1, 2], 0, 5)
    assert not back.reassigning


def test_a_new_target_replaces_the_one_in_progress() -> None:
    moving = started(state(), [1, 2, 3], LIVE)
    assert moving is not None
    again = started(moving, [0, 1, 2], LIVE)
    assert again is not None
    assert (again.replicas, again.reassigning, again.leader_epoch) == ([0, 1, 2], False, 5)


def test_the_same_target_changes_nothing() -> None:
    current = state()
    assert started(current, [0, 1, 2], LIVE) is current


def test_bad_requests_get_kafkas_errors() -> None:
    current = state()
    assert refusal(current, None, LIVE)[0] == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS  # type: ignore[index]
    for bad in ([], [1, 1, 2], [0, 1, 7]):
        assert refusal(current, bad, LIVE)[0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT  # type: ignore[index]
    refused = refusal(current, [1, 2], LIVE, allow_replication_factor_change=False)
    assert refused is not None and refused[0] == ErrorCode.INVALID_REPLICATION_FACTOR
    assert refusal(current, [1, 2, 3], LIVE) is None


def test_cancel_is_refused_when_no_original_replica_is_in_sync() -> None:
    moving = started(state(), [3], LIVE)
    assert moving is not None
    # The original replicas all fell out of the ISR; only the new one is in sync.
    lonely = PartitionState(**{**moving.__dict__, "leader": 3, "isr": [3]})
    refused = refusal(lonely, None, LIVE)
    assert refused is not None and refused[0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
