"""The controller's decisions as pure functions of partition state and broker liveness:
replica assignment, leader election (clean and unclean), reactions to brokers leaving,
returning and shutting down, and preferred-leader election. No I/O here."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection

from epochlog.metadata import model
from epochlog.metadata.model import PartitionState

NO_LEADER = -1


def assign_replicas(
    num_partitions: int, replication_factor: int, brokers: list[int], start: int
) -> dict[int, list[int]]:
    """Spread leaders and followers round-robin over the sorted live brokers, the way
    Kafka's rack-unaware assignment does, starting at ``start`` to vary the first leader."""
    ordered = sorted(brokers)
    count = len(ordered)
    return {
        p: [ordered[(start + p + r) % count] for r in range(replication_factor)]
        for p in range(num_partitions)
    }


def _changed(state: PartitionState, **changes: object) -> PartitionState:
    new = dataclasses.replace(state, **changes)
    if new.leader != state.leader:
        new = dataclasses.replace(new, leader_epoch=state.leader_epoch + 1)
    return dataclasses.replace(new, partition_epoch=state.partition_epoch + 1)


def initial_state(replicas: list[int], live: Collection[int]) -> PartitionState:
    """A new partition: the first live replica leads at epoch 0; live replicas form the ISR."""
    isr = [r for r in replicas if r in live]
    leader = isr[0] if isr else NO_LEADER
    offline = [r for r in replicas if r not in live]
    return PartitionState(
        leader=leader,
        leader_epoch=0,
        replicas=list(replicas),
        isr=isr or list(replicas[:1]),
        offline_replicas=offline,
    )


def elect(
    state: PartitionState,
    live: Collection[int],
    unclean_allowed: bool,
    excluded: Collection[int] = (),
) -> PartitionState:
    """State after the leader became unavailable (dead, shutting down or offline).

    Clean: the first live ISR member in replica order leads. Unclean (opt-in per topic):
    any live replica leads and the ISR restarts with it alone. Otherwise the partition is
    left without a leader, keeping the last ISR so a returning member can lead again.
    """
    eligible = [r for r in state.replicas if r in live and r not in excluded]
    offline = [r for r in state.replicas if r not in live]
    clean = [r for r in eligible if r in state.isr]
    if clean:
        isr = [r for r in state.isr if r in live and r not in excluded] or [clean[0]]
        return _changed(
            state, leader=clean[0], isr=isr, offline_replicas=offline, elected_uncleanly=False
        )
    if unclean_allowed and eligible:
        return _changed(
            state,
            leader=eligible[0],
            isr=[eligible[0]],
            offline_replicas=offline,
            elected_uncleanly=True,
        )
    return _changed(
        state,
        leader=NO_LEADER,
        isr=state.isr[-1:] if state.isr else [],
        offline_replicas=offline,
    )


def on_brokers_changed(
    state: PartitionState,
    live: Collection[int],
    unclean_allowed: bool,
    shutting_down: Collection[int],
) -> PartitionState | None:
    """The partition's new state after the set of live brokers changed, or None."""
    offline = [r for r in state.replicas if r not in live]
    leader_gone = state.leader == NO_LEADER or state.leader not in live
    if leader_gone:
        new = elect(state, live, unclean_allowed, shutting_down)
        if (
            new.leader == state.leader
            and new.isr == state.isr
            and offline == state.offline_replicas
        ):
            return None
        return new
    if model._PLANTED_OFFLINE_JOINS_ISR and offline == state.offline_replicas:
        return None
    shrunk = [r for r in state.isr if r in live]
    if shrunk != state.isr or offline != state.offline_replicas:
        return _changed(state, isr=shrunk, offline_replicas=offline)
    return None


def move_leadership_away(
    state: PartitionState, broker: int, live: Collection[int], shutting_down: Collection[int]
) -> PartitionState | None:
    """Controlled shutdown: hand leadership to another ISR member and drop the broker
    from the ISR, so it leads and acknowledges nothing when it stops."""
    if state.leader == broker:
        others = [r for r in state.isr if r != broker and r in live and r not in shutting_down]
        if not others:
            return None
        return _changed(state, leader=others[0], isr=[r for r in state.isr if r != broker])
    if broker in state.isr and len(state.isr) > 1:
        return _changed(state, isr=[r for r in state.isr if r != broker])
    return None


def preferred_leader(
    state: PartitionState, live: Collection[int], shutting_down: Collection[int]
) -> PartitionState | None:
    """Give leadership back to the first assigned replica when it is live and in sync."""
    preferred = state.replicas[0]
    if state.leader == preferred or preferred not in state.isr:
        return None
    if preferred not in live or preferred in shutting_down:
        return None
    return _changed(state, leader=preferred)


def apply_isr_change(
    state: PartitionState,
    leader_epoch: int,
    partition_epoch: int,
    new_isr: list[int],
    live: Collection[int],
) -> PartitionState | None:
    """Accept a leader's ISR proposal only if it was made against the current state, and
    never let a replica the controller considers offline into the ISR."""
    if leader_epoch != state.leader_epoch or partition_epoch != state.partition_epoch:
        return None
    if state.leader not in new_isr:
        # A leader leaving its own ISR resigns (epochlog's rule, for a leader whose log
        # was found damaged below its high watermark): another in-sync replica, which
        # holds every record up to that watermark, leads in a new epoch.
        if not new_isr or any(r not in state.isr or r not in live for r in new_isr):
            return None
        return _changed(state, leader=new_isr[0], isr=list(new_isr))
    if any(r not in state.replicas for r in new_isr):
        return None
    added = set(new_isr) - set(state.isr)
    if not all(state.may_join_isr(r, live) for r in added):
        return None
    return _changed(state, isr=list(new_isr))
