"""The position state machine (no I/O): the draft KIP-320 reset table cell by cell,
divergence finding, and when validation happens."""

from __future__ import annotations

import pytest

from epochlog.client.positions import (
    PartitionPosition,
    Phase,
    ResetCause,
    ResetPlan,
    ResetPolicy,
    Target,
    reset_plan,
)
from epochlog.protocol.divergence import Divergence, find_divergence

E, L, C, N = ResetPolicy.EARLIEST, ResetPolicy.LATEST, ResetPolicy.CLOSEST, ResetPolicy.NONE
INIT = ResetCause.INITIALIZATION
LOW = ResetCause.OUT_OF_RANGE_LOW
KNOWN = ResetCause.TRUNCATION_KNOWN
UNKNOWN = ResetCause.TRUNCATION_UNKNOWN

# Row "latest": log end, log end, truncation offset, log end.
# Row "earliest": log start, log start, truncation offset, log start.
# Row "closest": log start, log start, truncation offset, timestamp else log end.
TABLE = [
    (L, INIT, ResetPlan(Target.LOG_END)),
    (L, LOW, ResetPlan(Target.LOG_END)),
    (L, KNOWN, ResetPlan(Target.DIVERGENCE, offset=42)),
    (L, UNKNOWN, ResetPlan(Target.LOG_END)),
    (E, INIT, ResetPlan(Target.LOG_START)),
    (E, LOW, ResetPlan(Target.LOG_START)),
    (E, KNOWN, ResetPlan(Target.DIVERGENCE, offset=42)),
    (E, UNKNOWN, ResetPlan(Target.LOG_START)),
    (C, INIT, ResetPlan(Target.LOG_START)),
    (C, LOW, ResetPlan(Target.LOG_START)),
    (C, KNOWN, ResetPlan(Target.DIVERGENCE, offset=42)),
    (C, UNKNOWN, ResetPlan(Target.TIMESTAMP, timestamp=1_700_000_000_000)),
    (N, INIT, ResetPlan(Target.ERROR)),
    (N, LOW, ResetPlan(Target.ERROR)),
    (N, KNOWN, ResetPlan(Target.ERROR)),
    (N, UNKNOWN, ResetPlan(Target.ERROR)),
]


@pytest.mark.parametrize(
    ("policy", "cause", "plan"), TABLE, ids=[f"{p.value}-{c.name}" for p, c, _ in TABLE]
)
def test_reset_table_cell(policy: ResetPolicy, cause: ResetCause, plan: ResetPlan) -> None:
    assert reset_plan(policy, cause, divergence=42, last_timestamp=1_700_000_000_000) == plan


@pytest.mark.parametrize("timestamp", [None, -1])
def test_closest_without_a_record_timestamp_falls_back_to_the_log_end(
    timestamp: int | None,
) -> None:
    assert reset_plan(C, UNKNOWN, last_timestamp=timestamp) == ResetPlan(Target.LOG_END)


def test_divergence_same_epoch_ending_before_position_is_known() -> None:
    assert find_divergence(10, 3, 3, 7) == Divergence(True, 7, 3)
    assert find_divergence(10, 3, 3, 10) == Divergence(False)
    assert find_divergence(10, 3, 3, 15) == Divergence(False)


def test_divergence_unknown_when_the_leader_has_no_answer() -> None:
    assert find_divergence(10, 3, -1, -1) == Divergence(True)


def test_divergence_epoch_missing_on_leader_uses_where_we_began_that_epoch() -> None:
    # Read epoch 2 from offset 5; the leader knows epoch 1 up to 8: offsets 5.. diverged.
    assert find_divergence(10, 2, 1, 8, [(1, 0), (2, 5)]) == Divergence(True, 5, 1)
    # Without history, the end of the leader's epoch is the best known point.
    assert find_divergence(10, 2, 1, 8) == Divergence(True, 8, 1)
    # ... and when that end is not below the position, the point is unknown.
    assert find_divergence(10, 2, 1, 12) == Divergence(True)


def fetching(offset: int = 10, epoch: int | None = 3, leader_epoch: int = 3) -> PartitionPosition:
    pos = PartitionPosition()
    pos.update_leader(1, leader_epoch)
    pos.seek(offset, epoch)
    if epoch is not None:
        pos.complete_validation(epoch, offset, E)
    assert pos.phase is Phase.FETCHING
    return pos


def test_assigned_partition_awaits_reset_then_fetches() -> None:
    pos = PartitionPosition()
    assert pos.phase is Phase.AWAIT_RESET and not pos.can_reset()
    pos.update_leader(1, 0)
    assert pos.can_reset() and pos.plan_reset(E) == ResetPlan(Target.LOG_START)
    move = pos.complete_reset(0, Target.LOG_START)
    assert pos.can_fetch() and (move.old, move.new) == (None, 0)


def test_seek_with_epoch_validates_seek_without_does_not() -> None:
    pos = PartitionPosition()
    pos.update_leader(1, 3)
    pos.seek(10, 3)
    assert pos.phase is Phase.AWAIT_VALIDATION and pos.can_validate()
    pos.seek(10)
    assert pos.can_fetch()


def test_validation_waits_until_metadata_reaches_the_position_epoch() -> None:
    pos = PartitionPosition()
    pos.update_leader(1, 2)
    pos.seek(10, 4)  # a committed epoch ahead of the metadata held
    assert pos.phase is Phase.AWAIT_VALIDATION and not pos.can_validate()
    pos.update_leader(1, 4)
    assert pos.can_validate()


def test_leader_epoch_change_in_metadata_triggers_validation() -> None:
    pos = fetching()
    assert pos.update_leader(2, 4) is True
    assert pos.phase is Phase.AWAIT_VALIDATION


def test_leader_change_without_a_position_epoch_fetches_on() -> None:
    pos = fetching(epoch=None)
    assert pos.update_leader(2, 4) is False
    assert pos.can_fetch()


def test_fenced_answer_forgets_the_leader_and_validates() -> None:
    pos = fetching()
    assert pos.leader_lost() is True
    assert pos.phase is Phase.AWAIT_VALIDATION and not pos.can_validate()
    pos.update_leader(2, 4)
    assert pos.can_validate()


def test_known_truncation_moves_to_divergence_with_its_epoch() -> None:
    pos = fetching()
    pos.update_leader(2, 4)
    move = pos.complete_validation(3, 7, E)
    assert move is not None and "re-reads offsets 7..9" in move.describe("t-0")
    assert (pos.offset, pos.offset_epoch, pos.phase) == (7, 3, Phase.FETCHING)


def test_known_truncation_with_none_fails_with_the_offset() -> None:
    pos = fetching()
    pos.update_leader(2, 4)
    assert pos.complete_validation(3, 7, N) is None
    assert (pos.phase, pos.cause, pos.divergence, pos.offset) == (
        Phase.FAILED,
        KNOWN,
        7,
        10,
    )
    pos.seek(7, 3)  # the application handles it and goes on
    assert pos.phase is Phase.AWAIT_VALIDATION


def test_unknown_truncation_resets_by_policy() -> None:
    pos = fetching()
    pos.consumed(12, 3, 1_700_000_000_005, 10)
    pos.update_leader(2, 4)
    assert pos.complete_validation(-1, -1, C) is None
    assert pos.phase is Phase.AWAIT_RESET and pos.cause is UNKNOWN
    assert pos.plan_reset(C) == ResetPlan(Target.TIMESTAMP, timestamp=1_700_000_000_005)
    move = pos.complete_reset(20, Target.TIMESTAMP)
    assert "skips offsets 12..19" in move.describe("t-0")
    assert pos.offset_epoch is None


def test_unknown_truncation_with_none_fails_without_an_offset() -> None:
    pos = fetching()
    pos.update_leader(2, 4)
    pos.complete_validation(-1, -1, N)
    assert (pos.phase, pos.cause, pos.divergence) == (Phase.FAILED, UNKNOWN, None)


def test_out_of_range_low_resets_high_without_epoch_is_unknown_truncation() -> None:
    low = fetching(offset=3, epoch=None)
    low.out_of_range(5, 9, L)
    assert (low.phase, low.cause) == (Phase.AWAIT_RESET, LOW)
    assert low.plan_reset(L) == ResetPlan(Target.LOG_END)
    high = fetching(offset=12, epoch=None)
    high.out_of_range(5, 9, E)
    assert (high.phase, high.cause) == (Phase.AWAIT_RESET, UNKNOWN)


def test_out_of_range_high_with_epoch_validates_and_agreeing_epoch_is_unknown() -> None:
    pos = fetching(offset=12, epoch=3)
    pos.out_of_range(0, 9, E)
    assert pos.phase is Phase.AWAIT_VALIDATION
    pos.complete_validation(3, 12, E)  # the epoch agrees, yet the log ends at 9
    assert (pos.phase, pos.cause) == (Phase.AWAIT_RESET, UNKNOWN)


def test_out_of_range_high_with_epoch_finds_the_divergence() -> None:
    pos = fetching(offset=12, epoch=3)
    pos.out_of_range(0, 9, E)
    pos.complete_validation(3, 8, E)
    assert (pos.offset, pos.phase) == (8, Phase.FETCHING)


def test_consumed_records_set_the_position_epoch_and_history() -> None:
    pos = fetching(offset=0, epoch=None)
    pos.consumed(5, 0, 100, 0)
    pos.consumed(9, 2, 104, 5)
    assert (pos.offset, pos.offset_epoch, pos.last_timestamp) == (9, 2, 104)
    assert pos.consumed_epochs == [(0, 0), (2, 5)]


def test_a_preferred_read_replica_is_fetched_from_until_it_expires() -> None:
    pos = fetching()
    assert pos.fetch_from(now=0.0) == 1
    pos.prefer_replica(2, until=300.0)
    assert pos.fetch_from(now=299.9) == 2
    # After metadata.max.age.ms the leader is asked again (and may name it again).
    assert pos.fetch_from(now=300.0) == 1


def test_an_error_from_the_read_replica_sends_fetches_back_to_the_leader() -> None:
    pos = fetching()
    pos.prefer_replica(2, until=300.0)
    assert pos.leave_read_replica() == 2
    assert pos.fetch_from(now=0.0) == 1
    assert pos.leave_read_replica() is None


def test_a_leader_change_forgets_the_read_replica_the_old_leader_chose() -> None:
    pos = fetching()
    pos.prefer_replica(2, until=300.0)
    pos.update_leader(1, 3)  # the same leader and epoch: kept
    assert pos.fetch_from(now=0.0) == 2
    pos.update_leader(3, 4)
    assert pos.read_replica is None
    pos.prefer_replica(2, until=300.0)
    pos.leader_lost()
    assert pos.read_replica is None and pos.fetch_from(now=0.0) is None
