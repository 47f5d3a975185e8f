"""Where a consumer stands in each partition and what it must do next (KIP-320 and its
draft's ``closest`` policy). Pure: no I/O, no clock; the consumer performs the requests
this module asks for and feeds the answers back, so every decision is unit-testable.

A position is (offset, leader epoch of the record before it). A partition is in one
phase: waiting for a reset (ListOffsets), waiting for validation (OffsetsForLeaderEpoch),
fetching, or failed (an error the application must see, until it seeks).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from epochlog.client.client_metrics import ConsumerCounts
from epochlog.client.errors import (
    LogTruncationError,
    NoOffsetForPartitionError,
    OffsetOutOfRangeError,
    TopicPartition,
)
from epochlog.protocol.divergence import Divergence, find_divergence

NO_EPOCH = -1
# The consumed-epoch history kept per partition (the draft's "small cache").
EPOCH_HISTORY = 16


class ResetPolicy(enum.Enum):
    EARLIEST = "earliest"
    LATEST = "latest"
    CLOSEST = "closest"
    NONE = "none"


class ResetCause(enum.Enum):
    """The columns of the draft's table."""

    INITIALIZATION = "initialization"
    OUT_OF_RANGE_LOW = "offset out of range (too low)"
    TRUNCATION_KNOWN = "truncation at a known offset"
    TRUNCATION_UNKNOWN = "truncation at an unknown offset"


class Target(enum.Enum):
    LOG_START = "log start offset"
    LOG_END = "log end offset"
    DIVERGENCE = "divergence offset"
    TIMESTAMP = "offset for the timestamp of the last consumed record"
    ERROR = "error"


@dataclass(frozen=True)
class ResetPlan:
    target: Target
    offset: int | None = None
    timestamp: int | None = None


def reset_plan(
    policy: ResetPolicy,
    cause: ResetCause,
    divergence: int | None = None,
    last_timestamp: int | None = None,
) -> ResetPlan:
    """The draft KIP's table: where ``policy`` moves a position for ``cause``."""
    if policy is ResetPolicy.NONE:
        return ResetPlan(Target.ERROR)
    if cause is ResetCause.TRUNCATION_KNOWN:
        assert divergence is not None
        return ResetPlan(Target.DIVERGENCE, offset=divergence)
    if policy is ResetPolicy.EARLIEST:
        return ResetPlan(Target.LOG_START)
    if policy is ResetPolicy.LATEST:
        return ResetPlan(Target.LOG_END)
    # closest
    if cause is ResetCause.TRUNCATION_UNKNOWN:
        if last_timestamp is not None and last_timestamp >= 0:
            return ResetPlan(Target.TIMESTAMP, timestamp=last_timestamp)
        return ResetPlan(Target.LOG_END)
    return ResetPlan(Target.LOG_START)


class Phase(enum.Enum):
    AWAIT_RESET = "await reset"
    AWAIT_VALIDATION = "await validation"
    FETCHING = "fetching"
    FAILED = "failed"


@dataclass(frozen=True)
class Move:
    """An automatic change of position, for the log line that reports it."""

    old: int | None
    new: int
    reason: str

    def describe(self, tp: object) -> str:
        if self.old is None:
            return f"{tp}: position set to {self.new} ({self.reason})"
        if self.new < self.old:
            span = f"re-reads offsets {self.new}..{self.old - 1}"
        elif self.new > self.old:
            span = f"skips offsets {self.old}..{self.new - 1}"
        else:
            span = "stays"
        return f"{tp}: position {self.old} -> {self.new}, {span} ({self.reason})"


@dataclass
class PartitionPosition:
    phase: Phase = Phase.AWAIT_RESET
    offset: int | None = None
    offset_epoch: int | None = None
    leader: int | None = None
    leader_epoch: int | None = None
    cause: ResetCause = ResetCause.INITIALIZATION
    divergence: int | None = None
    last_timestamp: int | None = None
    # Set when validating because the fetch offset was above the log end.
    out_of_range_high: bool = False
    consumed_epochs: list[tuple[int, int | None]] = field(default_factory=list)
    # KIP-392: the replica the leader sent this partition's fetches to, until when
    # (monotonic seconds); the leader tells again once that passes (metadata.max.age.ms).
    read_replica: int | None = None
    read_replica_until: float = 0.0
    # The consumer's counts (truncations found, resets made), shared by its positions.
    counts: ConsumerCounts = field(default_factory=ConsumerCounts)

    @property
    def current_leader_epoch(self) -> int:
        return NO_EPOCH if self.leader_epoch is None else self.leader_epoch

    def can_fetch(self) -> bool:
        return self.phase is Phase.FETCHING and self.leader is not None

    def can_validate(self) -> bool:
        """Validation waits until metadata has reached the position's epoch (KIP-320: a
        committed epoch may be ahead of the first metadata answer)."""
        return (
            self.phase is Phase.AWAIT_VALIDATION
            and self.leader is not None
            and self.leader_epoch is not None
            and self.offset_epoch is not None
            and self.leader_epoch >= self.offset_epoch
        )

    def can_reset(self) -> bool:
        return self.phase is Phase.AWAIT_RESET and self.leader is not None

    def fetch_from(self, now: float) -> int | None:
        """The broker to fetch from: the preferred read replica while it lasts, else the
        leader (ListOffsets and OffsetsForLeaderEpoch always go to the leader)."""
        if self.read_replica is not None and now < self.read_replica_until:
            return self.read_replica
        return self.leader

    def prefer_replica(self, replica: int, until: float) -> None:
        self.read_replica = replica
        self.read_replica_until = until

    def leave_read_replica(self) -> int | None:
        """Fetch from the leader again; the replica left, if there was one."""
        replica, self.read_replica = self.read_replica, None
        return replica

    # -- transitions -------------------------------------------------------------------

    def seek(self, offset: int, epoch: int | None = None) -> None:
        """An application seek: validate first when it comes with an epoch."""
        self.offset = offset
        self.offset_epoch = epoch
        self.divergence = None
        self.out_of_range_high = False
        self.consumed_epochs = [] if epoch is None else [(epoch, None)]
        self.phase = Phase.FETCHING if epoch is None else Phase.AWAIT_VALIDATION

    def update_leader(self, leader: int, leader_epoch: int) -> bool:
        """Metadata named the leader; a new epoch means validating before fetching.
        Returns True if the partition now awaits validation because of it."""
        changed = self.leader_epoch is not None and leader_epoch != self.leader_epoch
        if leader != self.leader or changed:
            self.read_replica = None  # the new leader may send it elsewhere
        self.leader = leader if leader >= 0 else None
        self.leader_epoch = leader_epoch
        if changed:
            return self._revalidate()
        return False

    def leader_lost(self) -> bool:
        """FENCED_LEADER_EPOCH or NOT_LEADER_OR_FOLLOWER: forget the leader until
        metadata names one, and validate against it."""
        self.leader = None
        self.read_replica = None
        return self._revalidate()

    def _revalidate(self) -> bool:
        if self.phase is Phase.FETCHING and self.offset_epoch is not None:
            self.phase = Phase.AWAIT_VALIDATION
            return True
        return False

    def complete_validation(
        self, answer_epoch: int, end_offset: int, policy: ResetPolicy
    ) -> Move | None:
        """Apply the leader's answer; a move is returned when the position changed."""
        if self.phase is not Phase.AWAIT_VALIDATION or self.offset is None:
            return None
        assert self.offset_epoch is not None
        found = find_divergence(
            self.offset, self.offset_epoch, answer_epoch, end_offset, self.consumed_epochs
        )
        if not found.truncated and self.out_of_range_high:
            # Above the log end, yet the epoch agrees: where it diverged is unknown.
            found = Divergence(True)
        return self.truncation(found, policy)

    def truncation(self, found: Divergence, policy: ResetPolicy) -> Move | None:
        """Act on a divergence found by validation or by a Fetch's DivergingEpoch."""
        self.out_of_range_high = False
        if not found.truncated:
            self.phase = Phase.FETCHING
            return None
        self.counts.truncations_detected += 1
        if policy is ResetPolicy.NONE:
            self.phase = Phase.FAILED
            self.cause = (
                ResetCause.TRUNCATION_UNKNOWN
                if found.offset is None
                else ResetCause.TRUNCATION_KNOWN
            )
            self.divergence = found.offset
            return None
        if found.offset is None:
            self.phase = Phase.AWAIT_RESET
            self.cause = ResetCause.TRUNCATION_UNKNOWN
            return None
        old = self.offset
        self.offset = found.offset
        self.offset_epoch = found.epoch
        self.consumed_epochs = [] if found.epoch is None else [(found.epoch, None)]
        self.phase = Phase.FETCHING
        self.counts.offset_resets += 1
        return Move(old, found.offset, f"log truncated, divergence at {found.offset}")

    def out_of_range(self, log_start: int, log_end: int, policy: ResetPolicy) -> None:
        """OFFSET_OUT_OF_RANGE, with the log's current bounds."""
        assert self.offset is not None
        if self.offset < log_start:
            self.cause = ResetCause.OUT_OF_RANGE_LOW
        elif self.offset <= log_end:
            return  # back in range (the log moved meanwhile): fetch again
        elif self.offset_epoch is not None:
            self.phase = Phase.AWAIT_VALIDATION
            self.out_of_range_high = True
            return
        else:
            self.cause = ResetCause.TRUNCATION_UNKNOWN
            self.counts.truncations_detected += 1
        self.phase = Phase.FAILED if policy is ResetPolicy.NONE else Phase.AWAIT_RESET

    def plan_reset(self, policy: ResetPolicy) -> ResetPlan:
        return reset_plan(policy, self.cause, self.divergence, self.last_timestamp)

    def complete_reset(self, offset: int, target: Target) -> Move:
        """The reset's ListOffsets answered: fetch from there, with no epoch to validate."""
        old = self.offset
        self.offset = offset
        self.offset_epoch = None
        self.consumed_epochs = []
        self.phase = Phase.FETCHING
        self.counts.offset_resets += 1
        return Move(old, offset, f"{self.cause.value}: reset to the {target.value}")

    def consumed(self, next_offset: int, epoch: int, timestamp: int, first_offset: int) -> None:
        """Records up to ``next_offset`` were handed out; the last in ``epoch``."""
        if not self.consumed_epochs or self.consumed_epochs[-1][0] != epoch:
            self.consumed_epochs.append((epoch, first_offset))
            del self.consumed_epochs[:-EPOCH_HISTORY]
        self.offset = next_offset
        self.offset_epoch = epoch if epoch >= 0 else None
        self.last_timestamp = timestamp


def failure(positions: Mapping[TopicPartition, PartitionPosition]) -> Exception | None:
    """What ``poll`` raises for failed positions (``auto.offset.reset`` none): a
    truncation first, then offsets below the log start, then positions never set."""
    failed = {tp: p for tp, p in positions.items() if p.phase is Phase.FAILED}
    if not failed:
        return None
    truncated = {
        tp: p
        for tp, p in failed.items()
        if p.cause in (ResetCause.TRUNCATION_KNOWN, ResetCause.TRUNCATION_UNKNOWN)
    }
    if truncated:
        return LogTruncationError(
            {tp: p.divergence for tp, p in truncated.items()},
            {tp: p.offset for tp, p in truncated.items() if p.offset is not None},
        )
    low = {tp: p.offset for tp, p in failed.items() if p.cause is ResetCause.OUT_OF_RANGE_LOW}
    if low:
        return OffsetOutOfRangeError({tp: o for tp, o in low.items() if o is not None})
    return NoOffsetForPartitionError(sorted(failed))
