"""The controller's pure decisions: who leads, in which epoch, with which ISR."""

from __future__ import annotations

from epochlog.controller.elections import (
    NO_LEADER,
    apply_isr_change,
    assign_replicas,
    elect,
    initial_state,
    move_leadership_away,
    on_brokers_changed,
    preferred_leader,
)
from epochlog.metadata.model import PartitionState


def state(
    leader: int, isr: list[int], epoch: int = 3, replicas: list[int] | None = None
) -> PartitionState:
    return PartitionState(
        leader=leader,
        leader_epoch=epoch,
        replicas=replicas or [0, 1, 2],
        isr=isr,
        partition_epoch=7,
    )


def test_assignment_spreads_leaders_round_robin() -> None:
    assert assign_replicas(3, 2, [2, 0, 1], start=0) == {0: [0, 1], 1: [1, 2], 2: [2, 0]}


def test_new_partition_is_led_by_first_live_replica_at_epoch_zero() -> None:
    new = initial_state([1, 2, 0], live={0, 2})
    assert (new.leader, new.leader_epoch, new.isr, new.offline_replicas) == (2, 0, [2, 0], [1])


def test_clean_election_picks_live_isr_member_and_bumps_leader_epoch() -> None:
    new = elect(state(0, [0, 1, 2]), live={1, 2}, unclean_allowed=False)
    assert (new.leader, new.leader_epoch, new.isr, new.partition_epoch) == (1, 4, [1, 2], 8)
    assert not new.elected_uncleanly and new.offline_replicas == [0]


def test_no_live_isr_member_leaves_partition_leaderless_unless_unclean_allowed() -> None:
    lagging_only = state(0, [0, 1])
    clean = elect(lagging_only, live={2}, unclean_allowed=False)
    assert (clean.leader, clean.isr) == (NO_LEADER, [1])
    unclean = elect(lagging_only, live={2}, unclean_allowed=True)
    assert (unclean.leader, unclean.isr, unclean.elected_uncleanly) == (2, [2], True)
    assert unclean.leader_epoch == 4


def test_follower_loss_shrinks_isr_without_leader_change() -> None:
    new = on_brokers_changed(
        state(0, [0, 1, 2]), live={0, 1}, unclean_allowed=False, shutting_down=()
    )
    assert (new.leader, new.leader_epoch, new.isr, new.offline_replicas) == (0, 3, [0, 1], [2])
    assert on_brokers_changed(new, live={0, 1}, unclean_allowed=False, shutting_down=()) is None


def test_returning_isr_member_leads_a_leaderless_partition() -> None:
    leaderless = elect(state(0, [0, 1]), live={2}, unclean_allowed=False)
    back = on_brokers_changed(leaderless, live={1, 2}, unclean_allowed=False, shutting_down=())
    assert back.leader == 1 and back.leader_epoch == leaderless.leader_epoch + 1


def test_controlled_shutdown_moves_leadership_and_leaves_isr() -> None:
    moved = move_leadership_away(state(0, [0, 1, 2]), 0, live={0, 1, 2}, shutting_down={0})
    assert (moved.leader, moved.isr, moved.leader_epoch) == (1, [1, 2], 4)
    dropped = move_leadership_away(state(1, [0, 1, 2]), 0, live={0, 1, 2}, shutting_down={0})
    assert (dropped.leader, dropped.isr, dropped.leader_epoch) == (1, [1, 2], 3)


def test_preferred_leader_returns_only_when_in_sync() -> None:
    assert preferred_leader(state(1, [1, 2]), live={0, 1, 2}, shutting_down=()) is None
    back = preferred_leader(state(1, [0, 1, 2]), live={0, 1, 2}, shutting_down=())
    assert (back.leader, back.leader_epoch) == (0, 4)


def test_isr_change_needs_current_epochs_and_refuses_offline_replicas() -> None:
    current = state(0, [0, 1])
    assert apply_isr_change(current, 3, 7, [0, 1, 2], live={0, 1, 2}).isr == [0, 1, 2]
    assert apply_isr_change(current, 2, 7, [0, 1, 2], live={0, 1, 2}) is None
    assert apply_isr_change(current, 3, 6, [0, 1, 2], live={0, 1, 2}) is None
    offline = PartitionState(0, 3, [0, 1, 2], [0, 1], offline_replicas=[2], partition_epoch=7)
    assert apply_isr_change(offline, 3, 7, [0, 1, 2], live={0, 1, 2}) is None
    assert apply_isr_change(current, 3, 7, [0], live={0}).isr == [0]
