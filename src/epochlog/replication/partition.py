"""One partition as this broker sees it: its log, who leads it, in which epoch, and on
the leader the state of every follower, from which the ISR and high watermark follow.

This is a state machine: it does no I/O of its own (the log it holds writes through the
Disk seam) and takes the time as an argument, so the ISR and high-watermark rules are unit
tested without sockets or clocks:

- the high watermark is the minimum log end over the ISR (plus replicas whose addition is
  pending), it advances only when every one of them last fetched in the leader's current
  epoch, and it never goes backwards on a leader;
- a follower joins the ISR only when its log end reached both the high watermark and the
  start offset of the leader's epoch, and never while the controller marks it offline;
- a follower leaves the ISR after ``replica.lag.time.max.ms`` without being caught up,
  and once out of it, counts again only from its next fetch;
- ISR changes are proposals to the controller; until one is committed the old ISR counts.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from epochlog.metadata.model import PartitionState
from epochlog.protocol.errors import ErrorCode, KafkaError
from epochlog.replication.fencing import check_current_leader_epoch
from epochlog.storage.producer_state import AppendOrigin, VerificationGuard

if TYPE_CHECKING:
    from epochlog.protocol.batch import WritableBatches
    from epochlog.storage.log import Log
    from epochlog.storage.results import AppendResult, TruncatedRange

NO_LEADER = -1
UNKNOWN_OFFSET = -1
# A planted bug for the simulator's tests (tests/sim/test_sim_planted.py), never set
# otherwise: a new leader takes its ISR followers as already at its log end in its
# epoch, so its HW advances while they are still on the old epoch.
_PLANTED_HW_BEFORE_FOLLOWERS_FETCH = False


class StateChange(enum.Enum):
    """What applying a controller state did to the partition."""

    IGNORED = "ignored"
    BECAME_LEADER = "became leader"
    BECAME_FOLLOWER = "became follower"
    UPDATED = "updated"


@dataclass
class FollowerReplica:
    """What the leader knows of one follower, from its fetches in this leadership."""

    broker_id: int
    log_end_offset: int = UNKNOWN_OFFSET
    # As its last fetch said (-1: not said); KIP-392 reads go only where it holds the offset.
    log_start_offset: int = UNKNOWN_OFFSET
    # The leader epoch its last accepted fetch carried (it passed the fencing check).
    fetch_epoch: int = -1
    last_caught_up_ms: int = 0
    last_fetch_ms: int = 0
    leader_end_at_last_fetch: int = UNKNOWN_OFFSET

    def record_fetch(
        self,
        fetch_offset: int,
        epoch: int,
        leader_end: int,
        now_ms: int,
        log_start_offset: int = UNKNOWN_OFFSET,
    ) -> None:
        """Kafka's rule for "caught up": the fetch reached the leader's log end, or at
        least the end the leader had at the follower's previous fetch."""
        if fetch_offset >= leader_end:
            self.last_caught_up_ms = max(self.last_caught_up_ms, now_ms)
        elif fetch_offset >= self.leader_end_at_last_fetch >= 0:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.log_end_offset = fetch_offset
        self.log_start_offset = log_start_offset
        self.fetch_epoch = epoch
        self.leader_end_at_last_fetch = leader_end
        self.last_fetch_ms = now_ms


class Partition:
    def __init__(
        self,
        topic: str,
        index: int,
        topic_id: uuid.UUID,
        log: Log,
        state: PartitionState,
        local_broker_id: int,
    ) -> None:
        self.topic = topic
        self.index = index
        self.topic_id = topic_id
        self.log = log
        self.state = state
        self.local_broker_id = local_broker_id
        # Told of an OSError from this partition's log: its log dir failed.
        self.on_storage_error: Callable[[OSError], None] | None = None
        # No high-watermark checkpoint yet: start from the log start and let the ISR (or,
        # alone in the ISR, this broker's own log end) move it.
        self.high_watermark = log.log_start_offset
        # Offset at which the current leader epoch began on this replica (KIP-207).
        self.leader_epoch_start_offset = log.log_end_offset
        self.followers: dict[int, FollowerReplica] = {}
        # The ISR proposed to the controller and not answered yet.
        self.pending_isr: list[int] | None = None
        # After a refused proposal, none before this time (ms).
        self.isr_retry_at_ms = 0
        # A leader whose log was cut at damage below its high watermark: it answers
        # NOT_LEADER_OR_FOLLOWER and asks to leave its ISR until its leadership ends.
        self.resigning = False
        self._transitioned = False
        # This replica's truncations since the broker started (epochlog_log_truncations):
        # how many, and the offsets and bytes they moved into quarantine.
        self.truncations = 0
        self.truncated_records = 0
        self.truncated_bytes = 0

    def __repr__(self) -> str:
        return f"{self.topic}-{self.index}"

    # -- state ---------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self.state.leader == self.local_broker_id

    @property
    def leader_epoch(self) -> int:
        return self.state.leader_epoch

    @property
    def elected_uncleanly(self) -> bool:
        return self.state.elected_uncleanly

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    def apply_state(self, state: PartitionState, now_ms: int = 0) -> StateChange:
        """Apply a controller decision idempotently; states older than the one held, or
        repeated, are ignored (brokers learn them late and maybe more than once)."""
        if self._transitioned and state.version <= self.state.version:
            return StateChange.IGNORED
        new_leadership = (
            not self._transitioned
            or state.leader_epoch > self.state.leader_epoch
            or state.leader != self.state.leader
        )
        if not new_leadership:
            self._update_same_epoch(state, now_ms)
            return StateChange.UPDATED
        self.resigning = False
        if state.leader == self.local_broker_id:
            self.become_leader(state, now_ms)
            return StateChange.BECAME_LEADER
        self.become_follower(state)
        return StateChange.BECAME_FOLLOWER

    def become_leader(self, state: PartitionState, now_ms: int = 0) -> None:
        """Start a leadership: the epoch starts at the log end; every follower must fetch
        in this epoch before the high watermark moves (it never moves backwards)."""
        self.state = state
        self._transitioned = True
        self.leader_epoch_start_offset = self.log.log_end_offset
        self.log.maybe_assign_epoch_start_offset(state.leader_epoch, self.log.log_end_offset)
        self.high_watermark = min(self.high_watermark, self.log.log_end_offset)
        self.pending_isr = None
        self.isr_retry_at_ms = 0
        self.followers = {
            r: FollowerReplica(r, last_caught_up_ms=now_ms if r in state.isr else 0)
            for r in state.replicas
            if r != self.local_broker_id
        }
        if _PLANTED_HW_BEFORE_FOLLOWERS_FETCH:
            for follower in self.followers.values():
                follower.log_end_offset = self.log.log_end_offset
                follower.fetch_epoch = state.leader_epoch
        self.maybe_advance_high_watermark()

    def become_follower(self, state: PartitionState) -> None:
        """Stop leading: produce is refused and the fetcher truncates then fetches."""
        self.state = state
        self._transitioned = True
        self.followers = {}
        self.pending_isr = None
        self.high_watermark = min(self.high_watermark, self.log.log_end_offset)

    def _update_same_epoch(self, state: PartitionState, now_ms: int) -> None:
        left_isr = [r for r in self.state.isr if r not in state.isr]
        self.state = state
        self.pending_isr = None
        self.isr_retry_at_ms = 0
        if not self.is_leader:
            return
        for r in left_isr:
            if r in self.followers:
                # Out of the ISR (the controller found it failed or restarted, or it
                # lagged): where it fetched before says nothing of what it holds now (a
                # restart loses unsynced records), so it must fetch again before it
                # counts for the HW or the ISR (Kafka's KIP-903). The simulator found it.
                self.followers[r] = FollowerReplica(r)
        for r in state.replicas:
            if r != self.local_broker_id and r not in self.followers:
                self.followers[r] = FollowerReplica(r, last_caught_up_ms=now_ms)
        for r in [r for r in self.followers if r not in state.replicas]:
            del self.followers[r]
        self.maybe_advance_high_watermark()

    def check_leader(self, current_leader_epoch: int, require_leader: bool = True) -> None:
        """Raise the error a request for this partition must get, if any."""
        error = check_current_leader_epoch(current_leader_epoch, self.leader_epoch)
        if error != ErrorCode.NONE:
            raise KafkaError(error, f"{self.topic}-{self.index} is at epoch {self.leader_epoch}")
        if require_leader and (not self.is_leader or self.resigning):
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{self.topic}-{self.index}")

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords on the leader: the log start moves to ``offset`` (-1: the high
        watermark), never past the high watermark, so nothing a follower may still need
        to acknowledge goes; followers follow from the log start in fetch answers.
        Returns the new log start (the low watermark)."""
        self.check_leader(-1)
        target = self.high_watermark if offset == -1 else offset
        if not 0 <= target <= self.high_watermark:
            raise KafkaError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"{self.topic}-{self.index}: {offset} is not in [0, {self.high_watermark}]",
            )
        self.log.maybe_increment_log_start_offset(target)
        return self.log.log_start_offset

    # -- leader: appends, follower fetches, high watermark -------------------------------

    def check_enough_replicas(self) -> None:
        """acks=all is refused before appending when the ISR is below min.insync.replicas."""
        min_isr = self.log.config.min_insync_replicas
        if len(self.state.isr) < min_isr:
            raise KafkaError(
                ErrorCode.NOT_ENOUGH_REPLICAS,
                f"{self}: ISR {self.state.isr} is smaller than min.insync.replicas={min_isr}",
            )

    def append_as_leader(
        self,
        records: WritableBatches,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        guard: VerificationGuard | None = None,
    ) -> AppendResult:
        try:
            result = self.log.append_as_leader(records, self.leader_epoch, origin, guard)
        except OSError as exc:
            raise self._storage_error(exc) from exc
        self.maybe_advance_high_watermark()
        return result

    def _storage_error(self, exc: OSError) -> KafkaError:
        """Kafka's answer to an I/O error of a log (its dir goes offline)."""
        if self.on_storage_error is not None:
            self.on_storage_error(exc)
        return KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"{self}: {exc}")

    def record_follower_fetch(
        self,
        replica_id: int,
        fetch_offset: int,
        fetch_epoch: int,
        now_ms: int,
        log_start_offset: int = UNKNOWN_OFFSET,
    ) -> bool:
        """A replica fetch passed the epoch check: note where the follower is. Returns
        whether the high watermark moved."""
        follower = self.followers.get(replica_id)
        if follower is None or not self.is_leader:
            return False
        follower.record_fetch(
            fetch_offset, fetch_epoch, self.log.log_end_offset, now_ms, log_start_offset
        )
        return self.maybe_advance_high_watermark()

    def _high_watermark_replicas(self) -> list[int]:
        """The committed ISR plus replicas being added: a replica whose addition the
        controller may commit at any moment must already hold what the HW covers."""
        members = list(self.state.isr)
        for r in self.pending_isr or []:
            if r not in members:
                members.append(r)
        return members

    def maybe_advance_high_watermark(self) -> bool:
        """Move the HW to the smallest log end over the ISR, but only when every ISR
        member is fetching in this leader's epoch (rule 3 of KIP-320's model)."""
        if not self.is_leader:
            return False
        candidate = self.log.log_end_offset
        for r in self._high_watermark_replicas():
            if r == self.local_broker_id:
                continue
            follower = self.followers.get(r)
            if follower is None or follower.fetch_epoch != self.leader_epoch:
                return False
            if follower.log_end_offset < 0:
                return False
            candidate = min(candidate, follower.log_end_offset)
        if candidate > self.high_watermark:
            self.high_watermark = candidate
            return True
        return False

    def ack_status(self, required_offset: int, append_epoch: int) -> ErrorCode | None:
        """For an acks=all append ending before ``required_offset`` made in
        ``append_epoch``: its answer, or None while it must still wait."""
        if not self.is_leader or not self._still_holds(required_offset, append_epoch):
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if self.high_watermark < required_offset:
            return None
        if len(self.state.isr) < self.log.config.min_insync_replicas:
            return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return ErrorCode.NONE

    def _still_holds(self, required_offset: int, append_epoch: int) -> bool:
        """Whether the records this leader appended in ``append_epoch``, up to
        ``required_offset``, are still in its log where they were appended: always within
        that epoch; after a later epoch of its own (a reassignment that leaves the leader
        where it is bumps the epoch), if the log's epoch history still has that epoch
        reach ``required_offset``, which it would not had the log been cut and refilled
        under another leader since. Kafka's DelayedProduce likewise answers an append
        once the high watermark passes it, across its leader's new epochs."""
        if self.leader_epoch == append_epoch:
            return True
        epoch, end = self.log.end_offset_for_epoch(append_epoch)
        return epoch == append_epoch and end >= required_offset

    # -- leader: ISR proposals -------------------------------------------------------------

    def _may_propose(self, now_ms: int) -> bool:
        return self.is_leader and self.pending_isr is None and now_ms >= self.isr_retry_at_ms

    def follower_in_sync(self, follower: FollowerReplica) -> bool:
        """Caught up to the HW and to the start of this leader's epoch, in this epoch."""
        return (
            follower.fetch_epoch == self.leader_epoch
            and follower.log_end_offset >= self.high_watermark
            and follower.log_end_offset >= self.leader_epoch_start_offset
            and self.state.may_join_isr(follower.broker_id)
        )

    def isr_expansion(self, now_ms: int) -> list[int] | None:
        """The ISR with every in-sync follower added, or None if there is nothing to add."""
        if not self._may_propose(now_ms):
            return None
        joining = [
            f.broker_id
            for f in self.followers.values()
            if f.broker_id not in self.state.isr and self.follower_in_sync(f)
        ]
        return self.state.isr + sorted(joining) if joining else None

    def isr_shrink(self, now_ms: int, lag_time_max_ms: int) -> list[int] | None:
        """The ISR without followers not caught up for ``lag_time_max_ms``, or None."""
        if not self._may_propose(now_ms):
            return None
        out = []
        for r in self.state.isr:
            if r == self.local_broker_id:
                continue
            follower = self.followers.get(r)
            if follower is None or now_ms - follower.last_caught_up_ms > lag_time_max_ms:
                out.append(r)
        return [r for r in self.state.isr if r not in out] if out else None

    def begin_isr_change(self, new_isr: list[int]) -> None:
        self.pending_isr = list(new_isr)

    def end_isr_change(self, refused: bool, now_ms: int, retry_backoff_ms: int) -> None:
        self.pending_isr = None
        if refused:
            self.isr_retry_at_ms = now_ms + retry_backoff_ms

    # -- follower --------------------------------------------------------------------------

    def append_as_follower(self, records: bytearray) -> AppendResult:
        try:
            return self.log.append_as_follower(records)
        except OSError as exc:
            raise self._storage_error(exc) from exc

    def update_follower_high_watermark(self, leader_high_watermark: int) -> bool:
        """A follower's HW is the leader's, capped by what it holds; never backwards."""
        new = min(leader_high_watermark, self.log.log_end_offset)
        if new > self.high_watermark:
            self.high_watermark = new
            return True
        return False

    def truncate_to(self, offset: int, reason: str) -> TruncatedRange | None:
        """Cut the log at ``offset`` (what goes is kept in quarantine by the log)."""
        try:
            removed = self.log.truncate_to(offset, reason)
        except OSError as exc:
            raise self._storage_error(exc) from exc
        self.high_watermark = min(self.high_watermark, self.log.log_end_offset)
        self._count_truncation(removed)
        return removed

    def truncate_fully_and_start_at(self, offset: int, reason: str) -> TruncatedRange | None:
        try:
            removed = self.log.truncate_fully_and_start_at(offset, reason)
        except OSError as exc:
            raise self._storage_error(exc) from exc
        self.high_watermark = offset
        self._count_truncation(removed)
        return removed

    def _count_truncation(self, removed: TruncatedRange | None) -> None:
        if removed is None:
            return
        self.truncations += 1
        self.truncated_records += removed.last_offset - removed.first_offset + 1
        self.truncated_bytes += removed.size

    def last_stable_offset(self) -> int:
        """What read_committed readers may see: below the high watermark and below the
        first record of any transaction still open."""
        first_unstable = self.log.first_unstable_offset()
        if first_unstable is None:
            return self.high_watermark
        return min(self.high_watermark, first_unstable)
