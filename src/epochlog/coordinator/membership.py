"""JoinGroup, SyncGroup, Heartbeat and LeaveGroup (Kafka's classic rebalance protocol),
and the deadlines that move groups along: session timeouts, the rebalance timeout,
the initial rebalance delay and members that never send SyncGroup.

The broker never looks inside protocol metadata or assignments (except to learn the
subscribed topics for KIP-211), so any assignor (range, round-robin, cooperative-sticky)
works: cooperative clients simply rejoin after revoking.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from epochlog.coordinator.group import Group, GroupState, JoinAnswer, Member
from epochlog.coordinator.registry import GroupRegistry, SyncAnswer
from epochlog.protocol.errors import ErrorCode

log = logging.getLogger("epochlog.coordinator")
S = GroupState


@dataclass(frozen=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    # JoinGroup v4+: a new dynamic member first gets MEMBER_ID_REQUIRED.
    require_known_member_id: bool


def join_error(member_id: str, error: ErrorCode) -> JoinAnswer:
    return JoinAnswer(member_id, error, -1, None, None, "", [])


class Membership:
    def __init__(self, registry: GroupRegistry) -> None:
        self.r = registry

    # -- JoinGroup ---------------------------------------------------------------------

    async def join(self, req: JoinRequest) -> JoinAnswer:
        if not req.group_id:
            return join_error(req.member_id, ErrorCode.INVALID_GROUP_ID)
        error = self.r.ownership_error(req.group_id)
        if error != ErrorCode.NONE:
            return join_error(req.member_id, error)
        s = self.r.settings
        if not s.min_session_timeout_ms <= req.session_timeout_ms <= s.max_session_timeout_ms:
            return join_error(req.member_id, ErrorCode.INVALID_SESSION_TIMEOUT)
        group = self.r.groups.get(req.group_id)
        if group is None:
            if req.member_id:
                return join_error(req.member_id, ErrorCode.UNKNOWN_MEMBER_ID)
            group = Group(req.group_id, state_timestamp_ms=self.r.now_ms())
            self.r.groups[req.group_id] = group
        if group.is_(S.DEAD):
            return join_error(req.member_id, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if not group.supports(req.protocol_type, req.protocols):
            return join_error(req.member_id, ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if not req.member_id:
            return await self._join_new(group, req)
        return await self._join_known(group, req)

    def _member(self, member_id: str, req: JoinRequest) -> Member:
        return Member(
            member_id,
            req.group_instance_id,
            req.client_id,
            req.client_host,
            req.rebalance_timeout_ms if req.rebalance_timeout_ms > 0 else req.session_timeout_ms,
            req.session_timeout_ms,
            req.protocol_type,
            list(req.protocols),
        )

    async def _join_new(self, group: Group, req: JoinRequest) -> JoinAnswer:
        instance = req.group_instance_id
        if instance is not None:
            member_id = self.r.new_member_id(instance)
            if instance in group.static_members:
                return await self._rejoin_static(group, req, member_id)
            if len(group.members) >= self.r.settings.max_group_size:
                return join_error("", ErrorCode.GROUP_MAX_SIZE_REACHED)
            return await self._add_and_wait(group, self._member(member_id, req))
        member_id = self.r.new_member_id(req.client_id)
        if len(group.members) + len(group.pending_members) >= self.r.settings.max_group_size:
            return join_error("", ErrorCode.GROUP_MAX_SIZE_REACHED)
        if req.require_known_member_id:
            group.pending_members[member_id] = self.r.now() + req.session_timeout_ms / 1000
            return join_error(member_id, ErrorCode.MEMBER_ID_REQUIRED)
        return await self._add_and_wait(group, self._member(member_id, req))

    async def _rejoin_static(self, group: Group, req: JoinRequest, member_id: str) -> JoinAnswer:
        """A static member restarted: it takes its old place under a new member id; the
        old id is fenced. A Stable group with unchanged protocols does not rebalance."""
        assert req.group_instance_id is not None
        old_id = group.static_members[req.group_instance_id]
        self.r.fail_join(group.group_id, old_id, ErrorCode.FENCED_INSTANCE_ID)
        self.r.answer_sync(group.group_id, old_id, (ErrorCode.FENCED_INSTANCE_ID, b""))
        member = group.replace_static_member(req.group_instance_id, member_id)
        member.client_id, member.client_host = req.client_id, req.client_host
        member.session_timeout_ms = req.session_timeout_ms
        if group.is_(S.STABLE) and member.same_protocols(req.protocols):
            member.heartbeat_deadline = self.r.now() + member.session_timeout_ms / 1000
            error = await self.r.store_group(group)
            if error != ErrorCode.NONE:
                return join_error(member_id, error)
            log.info("group %s: static member %s rejoined as %s", group.group_id, old_id, member_id)
            answer = group.current_join_answer(member_id)
            # The group keeps its assignment: nobody (not even a returning leader) reassigns.
            return JoinAnswer(
                member_id,
                ErrorCode.NONE,
                answer.generation_id,
                answer.protocol_type,
                answer.protocol_name,
                answer.leader_id,
                [],
            )
        member.protocols = list(req.protocols)
        return await self._rebalance_and_wait(group, member)

    async def _join_known(self, group: Group, req: JoinRequest) -> JoinAnswer:
        member_id = req.member_id
        if group.is_static_fenced(member_id, req.group_instance_id):
            return join_error(member_id, ErrorCode.FENCED_INSTANCE_ID)
        if member_id in group.pending_members:
            return await self._add_and_wait(group, self._member(member_id, req))
        member = group.members.get(member_id)
        if member is None or group.state in (S.EMPTY, S.DEAD):
            return join_error(member_id, ErrorCode.UNKNOWN_MEMBER_ID)
        unchanged = member.same_protocols(req.protocols)
        member.session_timeout_ms = req.session_timeout_ms
        if req.rebalance_timeout_ms > 0:
            member.rebalance_timeout_ms = req.rebalance_timeout_ms
        if group.is_(S.COMPLETING_REBALANCE) and unchanged:
            # It missed its JoinGroup answer: give it the current generation again.
            return group.current_join_answer(member_id)
        if group.is_(S.STABLE) and unchanged and member_id != group.leader_id:
            return group.current_join_answer(member_id)
        member.protocols = list(req.protocols)
        return await self._rebalance_and_wait(group, member)

    async def _add_and_wait(self, group: Group, member: Member) -> JoinAnswer:
        group.add_member(member)
        log.info("group %s: member %s joins", group.group_id, member.member_id)
        return await self._rebalance_and_wait(group, member)

    async def _rebalance_and_wait(self, group: Group, member: Member) -> JoinAnswer:
        member.awaiting_join = True
        waiter = self.r.wait_join(group.group_id, member.member_id)
        if group.can_rebalance:
            self.prepare_rebalance(group, f"member {member.member_id} joins")
        elif group.is_(S.PREPARING_REBALANCE):
            group.extend_initial_delay(self.r.now(), self.r.settings.initial_rebalance_delay_ms)
            self.r.wake()
        self.maybe_complete_join(group)
        return await waiter

    def prepare_rebalance(self, group: Group, reason: str) -> None:
        interrupted = group.prepare_rebalance(
            self.r.now(), self.r.now_ms(), self.r.settings.initial_rebalance_delay_ms
        )
        self.r.wake()
        for member_id in interrupted:
            self.r.answer_sync(group.group_id, member_id, (ErrorCode.REBALANCE_IN_PROGRESS, b""))
        log.info(
            "group %s: preparing to rebalance generation %d (%s)",
            group.group_id,
            group.generation_id,
            reason,
        )

    def maybe_complete_join(self, group: Group) -> None:
        if not group.join_can_complete(self.r.now()):
            return
        answers, removed = group.complete_join(self.r.now(), self.r.now_ms())
        self.r.wake()
        for member_id in removed:
            log.info("group %s: member %s did not rejoin in time", group.group_id, member_id)
        for answer in answers:
            self.r.answer_join(group.group_id, answer)
        log.info(
            "group %s: generation %d with %d members (%s)",
            group.group_id,
            group.generation_id,
            len(group.members),
            group.state.value,
        )
        if group.is_(S.EMPTY):
            self.r.background(self.r.store_group(group))

    # -- SyncGroup ---------------------------------------------------------------------

    async def sync(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
    ) -> SyncAnswer:
        error = self.r.ownership_error(group_id)
        if error != ErrorCode.NONE:
            return error, b""
        group = self.r.groups.get(group_id)
        error = self._member_error(group, generation_id, member_id, instance_id)
        if error != ErrorCode.NONE or group is None:
            return error, b""
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL, b""
        member = group.members[member_id]
        member.heartbeat_deadline = self.r.now() + member.session_timeout_ms / 1000
        if group.is_(S.PREPARING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS, b""
        if group.is_(S.STABLE):
            return ErrorCode.NONE, member.assignment
        # CompletingRebalance: wait for the leader's assignment to be stored.
        member.awaiting_sync = True
        waiter = self.r.wait_sync(group_id, member_id)
        if member_id == group.leader_id:
            self.r.background(self._store_assignment(group, generation_id, assignments))
        return await waiter

    async def _store_assignment(
        self, group: Group, generation_id: int, assignments: dict[str, bytes]
    ) -> None:
        error = await self.r.store_group(group, assignments)
        if not (group.is_(S.COMPLETING_REBALANCE) and group.generation_id == generation_id):
            return
        if error != ErrorCode.NONE:
            for m in group.members.values():
                if m.awaiting_sync:
                    m.awaiting_sync = False
                    self.r.answer_sync(group.group_id, m.member_id, (error, b""))
            self.prepare_rebalance(group, f"storing the assignment failed: {error.name}")
            return
        for member_id in group.complete_sync(assignments, self.r.now_ms()):
            member = group.members[member_id]
            self.r.answer_sync(group.group_id, member_id, (ErrorCode.NONE, member.assignment))
        log.info("group %s: generation %d is stable", group.group_id, generation_id)

    def _member_error(
        self, group: Group | None, generation_id: int, member_id: str, instance_id: str | None
    ) -> ErrorCode:
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_(S.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if group.is_static_fenced(member_id, instance_id):
            return ErrorCode.FENCED_INSTANCE_ID
        if not group.has(member_id) or group.is_(S.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        return ErrorCode.NONE

    # -- Heartbeat ---------------------------------------------------------------------

    def heartbeat(
        self, group_id: str, generation_id: int, member_id: str, instance_id: str | None
    ) -> ErrorCode:
        error = self.r.ownership_error(group_id)
        if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            # As Kafka's: answered blindly. librdkafka counts its session from the last
            # heartbeat that succeeded and would drop its assignment on a long load.
            return ErrorCode.NONE
        if error != ErrorCode.NONE:
            return error
        group = self.r.groups.get(group_id)
        error = self._member_error(group, generation_id, member_id, instance_id)
        if error != ErrorCode.NONE or group is None:
            return error
        member = group.members[member_id]
        member.heartbeat_deadline = self.r.now() + member.session_timeout_ms / 1000
        if group.is_(S.PREPARING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    # -- LeaveGroup --------------------------------------------------------------------

    def leave(
        self, group_id: str, leaving: list[tuple[str, str | None]]
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """Remove members (id, instance id); returns the group error and one per member
        (none with a coordinator's error, which is the group's alone, as Kafka answers)."""
        error = self.r.ownership_error(group_id)
        if error != ErrorCode.NONE:
            return error, []
        group = self.r.groups.get(group_id)
        if group is None:
            return ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID] * len(leaving)
        if group.is_(S.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        return ErrorCode.NONE, [self._leave_one(group, m, i) for m, i in leaving]

    def _leave_one(self, group: Group, member_id: str, instance_id: str | None) -> ErrorCode:
        if instance_id is not None:
            known = group.static_members.get(instance_id)
            if known is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if member_id and known != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
            member_id = known
        elif member_id in group.pending_members:
            del group.pending_members[member_id]
            self.maybe_complete_join(group)
            return ErrorCode.NONE
        if not group.has(member_id):
            return ErrorCode.UNKNOWN_MEMBER_ID
        self.remove_member(group, member_id, "left the group")
        return ErrorCode.NONE

    def remove_member(self, group: Group, member_id: str, reason: str) -> None:
        group.remove_member(member_id)
        self.r.fail_join(group.group_id, member_id, ErrorCode.UNKNOWN_MEMBER_ID)
        self.r.answer_sync(group.group_id, member_id, (ErrorCode.UNKNOWN_MEMBER_ID, b""))
        log.info("group %s: member %s %s", group.group_id, member_id, reason)
        if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
            self.prepare_rebalance(group, f"member {member_id} {reason}")
        self.maybe_complete_join(group)

    # -- deadlines ---------------------------------------------------------------------

    def tick(self) -> float:
        """Apply every deadline that passed; returns the next one (monotonic seconds)."""
        now = self.r.now()
        upcoming = now + 1.0
        for group in self.r.owned_groups():
            for member_id, deadline in list(group.pending_members.items()):
                if now >= deadline:
                    del group.pending_members[member_id]
                    log.info("group %s: pending member %s never joined", group.group_id, member_id)
                else:
                    upcoming = min(upcoming, deadline)
            for member in list(group.members.values()):
                if not group.has(member.member_id):
                    continue
                if member.awaiting_join or member.awaiting_sync:
                    continue
                if group.is_(S.EMPTY):
                    continue
                if now >= member.heartbeat_deadline:
                    self.remove_member(group, member.member_id, "timed out (session)")
                else:
                    upcoming = min(upcoming, member.heartbeat_deadline)
            if group.is_(S.COMPLETING_REBALANCE) and group.sync_deadline is not None:
                if now >= group.sync_deadline:
                    for member in list(group.members.values()):
                        if group.has(member.member_id) and not member.awaiting_sync:
                            self.remove_member(group, member.member_id, "never sent SyncGroup")
                    if group.is_(S.COMPLETING_REBALANCE):
                        self.prepare_rebalance(group, "SyncGroup timed out")
                else:
                    upcoming = min(upcoming, group.sync_deadline)
            self.maybe_complete_join(group)
            if group.is_(S.PREPARING_REBALANCE) and group.rebalance_deadline is not None:
                upcoming = min(upcoming, group.rebalance_deadline)
        return upcoming
