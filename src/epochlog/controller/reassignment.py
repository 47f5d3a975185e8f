"""Partition reassignment (KIP-455) as pure functions of a partition's state, as Kafka's
KRaft controller does it (``PartitionReassignmentReplicas``, ``PartitionChangeBuilder``):

- starting: the replicas become the target followed by the original replicas that
  leave (``adding_replicas`` / ``removing_replicas`` say which); new replicas start as
  followers and join the ISR the ordinary way, once caught up;
- completing, once every target replica is in the ISR: the replicas become the target,
  the ISR drops the removed ones, and a leader being removed hands over to the first
  target replica that is live and in sync;
- cancelling: back to the original replicas, refused when no original replica is in
  sync (it would take an unclean election);
- leader epochs: bumped when a replica leaves the assignment or the leader changes,
  never when replicas are only added (KRaft's rule); the partition epoch at every change.

No I/O here: the controller applies these in its reconciliation, the broker's
AlterPartitionReassignments handler asks ``refusal`` before filing a request.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection

from epochlog.metadata.model import PartitionState
from epochlog.protocol.errors import ErrorCode

NO_LEADER = -1


def refusal(
    state: PartitionState,
    target: list[int] | None,
    live: Collection[int],
    allow_replication_factor_change: bool = True,
) -> tuple[ErrorCode, str] | None:
    """Kafka's error for reassigning a partition in ``state`` to ``target`` (None:
    cancel), or None when the request is acceptable."""
    if target is None:
        if not state.reassigning:
            return ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "no reassignment is in progress"
        if cancelled(state, live) is None:
            return (
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                "no original replica is live and in sync: reverting would need an unclean election",
            )
        return None
    if not target:
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "the replica list cannot be empty"
    if len(set(target)) != len(target):
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"duplicate replicas in {target}"
    unknown = [r for r in target if r not in live]
    if unknown:
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"brokers {unknown} are not alive"
    if not allow_replication_factor_change and len(target) != len(state.original_replicas):
        return (
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"the replication factor would change from {len(state.original_replicas)}"
            f" to {len(target)}",
        )
    if started(state, target, live) is None:
        return (
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "no replica of the new assignment that stays is live and in sync",
        )
    return None


def started(
    state: PartitionState, target: list[int], live: Collection[int]
) -> PartitionState | None:
    """The state once a reassignment to ``target`` starts (replacing one in progress,
    whose adding replicas outside the new target leave at once): ``state`` itself when
    nothing changes, None if it would leave the partition with no in-sync replica."""
    original = state.original_replicas
    replicas = list(target) + [r for r in original if r not in target]
    adding = [r for r in target if r not in original]
    removing = [r for r in original if r not in target]
    if (replicas, adding, removing) == (
        state.replicas,
        state.adding_replicas,
        state.removing_replicas,
    ):
        return state
    return _reshaped(state, replicas, adding, removing, live)


def cancelled(state: PartitionState, live: Collection[int]) -> PartitionState | None:
    """The state with the reassignment reverted to the original replicas, or None
    when no original replica is live and in sync."""
    return _reshaped(state, state.original_replicas, [], [], live)


def completed(state: PartitionState, live: Collection[int]) -> PartitionState | None:
    """The state with the reassignment done, once every target replica is in the ISR;
    None while it must wait (or there is none)."""
    if not state.reassigning:
        return None
    target = state.target_replicas
    if any(r not in state.isr for r in target):
        return None
    return _reshaped(state, target, [], [], live)


def _reshaped(
    state: PartitionState,
    replicas: list[int],
    adding: list[int],
    removing: list[int],
    live: Collection[int],
) -> PartitionState | None:
    dropped = [r for r in state.replicas if r not in replicas]
    isr = [r for r in state.isr if r in replicas]
    leader = state.leader
    if leader in dropped:
        candidates = [r for r in replicas if r in isr and r in live]
        if not candidates:
            return None
        leader = candidates[0]
    if not isr:
        return None
    new = dataclasses.replace(
        state,
        leader=leader,
        replicas=list(replicas),
        isr=isr,
        offline_replicas=[r for r in replicas if r not in live],
        adding_replicas=list(adding),
        removing_replicas=list(removing),
        partition_epoch=state.partition_epoch + 1,
    )
    if dropped or leader != state.leader:
        new = dataclasses.replace(new, leader_epoch=state.leader_epoch + 1)
    if leader != state.leader:
        new = dataclasses.replace(new, elected_uncleanly=False)
    return new
