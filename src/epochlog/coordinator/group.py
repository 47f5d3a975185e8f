"""One consumer group's state machine (Kafka's classic rebalance protocol), without I/O.

States: Empty -> PreparingRebalance -> CompletingRebalance -> Stable, and Dead. Time
is passed in: ``now`` (monotonic seconds) for session and rebalance deadlines,
``now_ms`` (wall clock) for the state timestamp KIP-211 counts retention from. The
coordinator (``coordinator.py``) turns what these methods return into answers to the
requests that wait on them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from epochlog.coordinator.records import GroupValue, MemberValue, subscribed_topics
from epochlog.protocol.errors import ErrorCode

CONSUMER_PROTOCOL = "consumer"


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


S = GroupState
# The states each state may be entered from (Kafka's transition table).
VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    S.EMPTY: frozenset({S.PREPARING_REBALANCE}),
    S.PREPARING_REBALANCE: frozenset({S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY}),
    S.COMPLETING_REBALANCE: frozenset({S.PREPARING_REBALANCE}),
    S.STABLE: frozenset({S.COMPLETING_REBALANCE}),
    S.DEAD: frozenset(set(GroupState)),
}


class IllegalTransition(Exception):
    """A bug: the coordinator asked for a transition the protocol does not have."""


@dataclass
class CommittedOffset:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    # Log offset of the record that stored it: a late-acknowledged older commit never
    # overwrites a newer one.
    log_offset: int = -1


@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    awaiting_join: bool = False
    awaiting_sync: bool = False
    heartbeat_deadline: float = 0.0

    def metadata_for(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""

    def same_protocols(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols


@dataclass(frozen=True)
class JoinAnswer:
    """What a member waiting in JoinGroup gets when the join phase ends."""

    member_id: str
    error: ErrorCode
    generation_id: int
    protocol_type: str | None
    protocol_name: str | None
    leader_id: str
    # (member id, group instance id, metadata) for the leader; empty for the others.
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)


def merge_newer(
    offsets: dict[tuple[str, int], CommittedOffset], decided: dict[tuple[str, int], CommittedOffset]
) -> None:
    """Decided offsets replace only older commits (by their records' log position)."""
    for key, committed in decided.items():
        existing = offsets.get(key)
        if existing is None or existing.log_offset < committed.log_offset:
            offsets[key] = committed


@dataclass
class Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    state_timestamp_ms: int = -1
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)
    # Member ids handed out with MEMBER_ID_REQUIRED, not joined yet -> deadline.
    pending_members: dict[str, float] = field(default_factory=dict)
    rebalance_deadline: float | None = None
    # Initial delayed join (group.initial.rebalance.delay.ms): the latest it may end.
    initial_join_limit: float | None = None
    sync_deadline: float | None = None
    subscribed_topics: set[str] | None = None
    offsets: dict[tuple[str, int], CommittedOffset] = field(default_factory=dict)
    # Offsets committed inside transactions not decided yet, per producer id: visible
    # only once the transaction's commit marker is written (TxnOffsetCommit).
    pending_txn_offsets: dict[int, dict[tuple[str, int], CommittedOffset]] = field(
        default_factory=dict
    )

    # -- states -----------------------------------------------------------------------

    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def has_pending_offset(self, key: tuple[str, int]) -> bool:
        return any(key in pending for pending in self.pending_txn_offsets.values())

    def complete_txn_offsets(self, producer_id: int, commit: bool) -> None:
        """A transaction's marker: its offsets become committed (unless a later commit,
        by log position, already replaced them) or are dropped."""
        pending = self.pending_txn_offsets.pop(producer_id, {})
        if commit:
            merge_newer(self.offsets, pending)

    def transition(self, new: GroupState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS[new]:
            raise IllegalTransition(f"group {self.group_id}: {self.state.value} -> {new.value}")
        self.state = new
        self.state_timestamp_ms = now_ms

    @property
    def can_rebalance(self) -> bool:
        return self.state in (S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY)

    # -- members ----------------------------------------------------------------------

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def is_static_fenced(self, member_id: str, instance_id: str | None) -> bool:
        """A static member whose instance id now belongs to a newer member id."""
        if instance_id is None:
            return False
        known = self.static_members.get(instance_id)
        return known is not None and known != member_id

    def candidate_protocols(self) -> set[str]:
        """Protocols every member supports."""
        sets = [{name for name, _ in m.protocols} for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def supports(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        names = {name for name, _ in protocols}
        if not self.members:
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and bool(names & self.candidate_protocols())

    def add_member(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        self.pending_members.pop(member.member_id, None)
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove_member(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        instance = member.group_instance_id
        if instance is not None and self.static_members.get(instance) == member_id:
            del self.static_members[instance]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def replace_static_member(self, instance_id: str, new_member_id: str) -> Member:
        """A static member came back with a new member id: it keeps its place."""
        old_id = self.static_members[instance_id]
        member = self.members.pop(old_id)
        member.member_id = new_member_id
        self.members[new_member_id] = member
        self.static_members[instance_id] = new_member_id
        if self.leader_id == old_id:
            self.leader_id = new_member_id
        return member

    def all_members_joined(self) -> bool:
        return not self.pending_members and all(m.awaiting_join for m in self.members.values())

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # -- rebalance --------------------------------------------------------------------

    def prepare_rebalance(self, now: float, now_ms: int, initial_delay_ms: int) -> list[str]:
        """Enter PreparingRebalance; returns members whose SyncGroup wait must end with
        REBALANCE_IN_PROGRESS (a rebalance cut the CompletingRebalance phase short)."""
        interrupted = []
        if self.is_(S.COMPLETING_REBALANCE):
            for m in self.members.values():
                m.assignment = b""
                if m.awaiting_sync:
                    m.awaiting_sync = False
                    interrupted.append(m.member_id)
        timeout_s = self.max_rebalance_timeout_ms() / 1000
        if self.is_(S.EMPTY) and initial_delay_ms > 0:
            self.rebalance_deadline = now + min(initial_delay_ms / 1000, timeout_s)
            self.initial_join_limit = now + timeout_s
        else:
            self.rebalance_deadline = now + timeout_s
            self.initial_join_limit = None
        self.sync_deadline = None
        self.transition(S.PREPARING_REBALANCE, now_ms)
        return interrupted

    def extend_initial_delay(self, now: float, initial_delay_ms: int) -> None:
        """A member joined during the initial delay: wait one more delay for others,
        never past the rebalance timeout (Kafka's InitialDelayedJoin)."""
        if self.initial_join_limit is not None and self.rebalance_deadline is not None:
            self.rebalance_deadline = min(now + initial_delay_ms / 1000, self.initial_join_limit)

    def join_can_complete(self, now: float) -> bool:
        if not self.is_(S.PREPARING_REBALANCE):
            return False
        if self.initial_join_limit is None and self.all_members_joined():
            return True
        return self.rebalance_deadline is not None and now >= self.rebalance_deadline

    def select_protocol(self) -> str:
        """Each member votes for its most preferred protocol among those all support."""
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for m in self.members.values():
            choice = next(name for name, _ in m.protocols if name in candidates)
            votes[choice] = votes.get(choice, 0) + 1
        return max(sorted(votes), key=lambda name: votes[name])

    def complete_join(self, now: float, now_ms: int) -> tuple[list[JoinAnswer], list[str]]:
        """End the join phase: drop members that did not rejoin, start the next
        generation. Returns the answers for waiting members and the ids removed."""
        removed = [
            m.member_id
            for m in self.members.values()
            if not m.awaiting_join and m.group_instance_id is None
        ]
        for member_id in removed:
            self.remove_member(member_id)
        self.rebalance_deadline = None
        self.initial_join_limit = None
        self.generation_id += 1
        if not self.members:
            self.protocol_name = None
            self.leader_id = None
            self.subscribed_topics = None
            self.transition(S.EMPTY, now_ms)
            return [], removed
        self.protocol_name = self.select_protocol()
        if self.leader_id not in self.members:
            self.leader_id = next(iter(self.members))
        self.subscribed_topics = self._compute_subscriptions()
        self.transition(S.COMPLETING_REBALANCE, now_ms)
        timeout_s = self.max_rebalance_timeout_ms() / 1000
        self.sync_deadline = now + timeout_s
        answers = []
        assert self.leader_id is not None
        everyone = [
            (m.member_id, m.group_instance_id, m.metadata_for(self.protocol_name))
            for m in self.members.values()
        ]
        for m in self.members.values():
            m.heartbeat_deadline = now + m.session_timeout_ms / 1000
            if not m.awaiting_join:
                continue
            m.awaiting_join = False
            answers.append(
                JoinAnswer(
                    m.member_id,
                    ErrorCode.NONE,
                    self.generation_id,
                    self.protocol_type,
                    self.protocol_name,
                    self.leader_id,
                    everyone if m.member_id == self.leader_id else [],
                )
            )
        return answers, removed

    def current_join_answer(self, member_id: str) -> JoinAnswer:
        """The answer for a member rejoining with nothing changed: the current generation."""
        assert self.leader_id is not None
        members = []
        if member_id == self.leader_id and self.protocol_name is not None:
            members = [
                (m.member_id, m.group_instance_id, m.metadata_for(self.protocol_name))
                for m in self.members.values()
            ]
        return JoinAnswer(
            member_id,
            ErrorCode.NONE,
            self.generation_id,
            self.protocol_type,
            self.protocol_name,
            self.leader_id,
            members,
        )

    def _compute_subscriptions(self) -> set[str] | None:
        if self.protocol_type != CONSUMER_PROTOCOL or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            found = subscribed_topics(m.metadata_for(self.protocol_name))
            if found is None:
                return None
            topics |= found
        return topics

    def complete_sync(self, assignments: dict[str, bytes], now_ms: int) -> list[str]:
        """The leader's assignment is stored: hand it out and become Stable. Returns the
        members whose SyncGroup wait now ends."""
        for m in self.members.values():
            m.assignment = assignments.get(m.member_id, b"")
        self.sync_deadline = None
        self.transition(S.STABLE, now_ms)
        waiting = [m.member_id for m in self.members.values() if m.awaiting_sync]
        for member_id in waiting:
            self.members[member_id].awaiting_sync = False
        return waiting

    # -- persistence --------------------------------------------------------------------

    def to_value(self, assignments: dict[str, bytes] | None = None) -> GroupValue:
        """The GroupMetadataValue to store (with the given assignments, or the current)."""
        members = [
            MemberValue(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
                m.metadata_for(self.protocol_name) if self.protocol_name else b"",
                assignments.get(m.member_id, b"") if assignments is not None else m.assignment,
            )
            for m in self.members.values()
        ]
        return GroupValue(
            self.protocol_type or "",
            self.generation_id,
            self.protocol_name,
            self.leader_id,
            self.state_timestamp_ms,
            members,
        )

    @classmethod
    def from_value(cls, group_id: str, value: GroupValue, now: float) -> Group:
        """A group as loaded from the log: Stable with its members, or Empty. Members
        must heartbeat within their session timeout from now or are removed."""
        group = cls(group_id)
        group.generation_id = value.generation
        group.protocol_type = value.protocol_type or None
        group.protocol_name = value.protocol
        group.leader_id = value.leader
        group.state_timestamp_ms = value.current_state_timestamp
        for mv in value.members:
            member = Member(
                mv.member_id,
                mv.group_instance_id,
                mv.client_id,
                mv.client_host,
                mv.rebalance_timeout_ms,
                mv.session_timeout_ms,
                value.protocol_type,
                [(value.protocol or "", mv.subscription)],
                mv.assignment,
                heartbeat_deadline=now + mv.session_timeout_ms / 1000,
            )
            group.members[mv.member_id] = member
            if mv.group_instance_id is not None:
                group.static_members[mv.group_instance_id] = mv.member_id
        group.state = S.STABLE if group.members else S.EMPTY
        if group.members:
            group.subscribed_topics = group._compute_subscriptions()
        return group
