"""The group coordinator of one broker: it serves the groups that hash to the
``__consumer_offsets`` partitions this broker leads, loads a partition's groups when it
becomes its leader and forgets them when it stops, and runs the deadlines and the
KIP-211 expiry on the Clock seam."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from epochlog.coordinator.group import GroupState
from epochlog.coordinator.membership import Membership
from epochlog.coordinator.offsets import OffsetManager
from epochlog.coordinator.registry import GroupRegistry
from epochlog.coordinator.settings import CoordinatorSettings
from epochlog.coordinator.store import OffsetsStore, follow_leadership
from epochlog.protocol.errors import ErrorCode
from epochlog.seams.waiting import Signal

if TYPE_CHECKING:
    from epochlog.replication.replica_manager import ReplicaManager
    from epochlog.seams import Seams

log = logging.getLogger("epochlog.coordinator")


@dataclass(frozen=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupDescription:
    error: ErrorCode
    group_id: str
    state: str
    protocol_type: str
    protocol_data: str
    members: list[MemberDescription]


class GroupCoordinator:
    def __init__(
        self, replica_manager: ReplicaManager, seams: Seams, settings: CoordinatorSettings
    ) -> None:
        self.settings = settings
        self.clock = seams.clock
        store = OffsetsStore(replica_manager, seams.clock, settings.load_buffer_size)
        self.registry = GroupRegistry(store, seams.clock, seams.random, settings)
        self.membership = Membership(self.registry)
        self.offsets = OffsetManager(self.registry)
        self.registry.wake = self.wake
        # Serialises creating __consumer_offsets among concurrent FindCoordinator calls.
        self.topic_creation = asyncio.Lock()
        self._wake = Signal()
        self._task: asyncio.Task[None] | None = None
        self._stopped = False

    # -- lifecycle ---------------------------------------------------------------------

    async def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())
        self.on_leadership_change()

    async def stop(self) -> None:
        self._stopped = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for index in list(self.registry.owned):
            self.registry.unload(index)
        await self.registry.cancel_background()

    async def _run(self) -> None:
        """Deadlines as they fall due; expiry every offsets.retention.check.interval.ms."""
        interval_s = self.settings.retention_check_interval_ms / 1000
        next_expiry = self.clock.monotonic() + interval_s
        while not self._stopped:
            try:
                upcoming = self.membership.tick()
                if self.clock.monotonic() >= next_expiry:
                    next_expiry = self.clock.monotonic() + interval_s
                    await self.offsets.expire()
            except Exception:
                log.exception("group coordinator tick failed")
                upcoming = self.clock.monotonic() + 1.0
            wait_s = min(upcoming, next_expiry) - self.clock.monotonic()
            await self._wake.wait(self.clock, max(wait_s, 0.001))

    def wake(self) -> None:
        """Deadlines changed (a join, a leave): look again now."""
        self._wake.fire()

    # -- leadership --------------------------------------------------------------------

    def on_leadership_change(self, num_partitions: int | None = None) -> None:
        """Load the offsets partitions this broker now leads, unload the others.
        ``num_partitions``: the topic's real partition count, which groups hash over."""
        r = self.registry
        if num_partitions and num_partitions != r.num_partitions:
            for index in list(r.owned) + list(r.loading):
                r.unload(index)
            r.num_partitions = num_partitions
        follow_leadership(
            r.store.led(),
            r.owned,
            r.loading,
            r.unload,
            lambda index, epoch: r.background(r.load(index, epoch)),
        )
        self.wake()

    def on_topic_deleted(self, topic: str) -> None:
        """Its committed offsets go (in the background: they are tombstoned)."""
        self.registry.background(self.offsets.forget_topic(topic))

    # -- DescribeGroups and ListGroups -------------------------------------------------

    def describe(self, group_id: str) -> GroupDescription:
        error = self.registry.ownership_error(group_id)
        group = self.registry.groups.get(group_id) if error == ErrorCode.NONE else None
        if group is None:
            state = "Dead" if error == ErrorCode.NONE else ""
            return GroupDescription(error, group_id, state, "", "", [])
        stable = group.is_(GroupState.STABLE)
        protocol = group.protocol_name or ""
        members = [
            MemberDescription(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.metadata_for(protocol) if stable else b"",
                m.assignment if stable else b"",
            )
            for m in group.members.values()
        ]
        return GroupDescription(
            ErrorCode.NONE,
            group_id,
            group.state.value,
            group.protocol_type or "",
            protocol if stable else "",
            members,
        )

    def list_groups(self, states: set[str] | None) -> tuple[ErrorCode, list[tuple[str, str, str]]]:
        """(group, protocol type, state) of every group here; an error while loading."""
        error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self.registry.loading else ErrorCode.NONE
        wanted = {s.lower() for s in states} if states else None
        groups = [
            (g.group_id, g.protocol_type or "", g.state.value)
            for g in self.registry.owned_groups()
            if not g.is_(GroupState.DEAD) and (wanted is None or g.state.value.lower() in wanted)
        ]
        return error, sorted(groups)
