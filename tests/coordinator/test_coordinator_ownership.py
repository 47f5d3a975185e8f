"""What the group APIs answer from a broker that does not coordinate the group yet: its
partition still loading here, or led elsewhere. The shapes are Kafka's, which clients
rely on: librdkafka retries a group's error but takes one on a member or a partition as
final."""

from __future__ import annotations

import asyncio

from coordinator_fakes import Harness

from epochlog.protocol.errors import ErrorCode


def test_a_heartbeat_while_the_groups_partition_loads_is_answered_blindly() -> None:
    """Kafka answers NONE while loading: librdkafka's session runs from its last
    successful heartbeat, so an error for the whole load could cost it its assignment."""

    async def scenario() -> None:
        h = Harness()
        member, generation = await h.join_and_sync("g")
        h.registry.loading[0] = 0
        assert h.membership.heartbeat("g", generation, member, None) == ErrorCode.NONE
        assert h.membership.heartbeat("g", generation, "stranger", None) == ErrorCode.NONE
        del h.registry.loading[0]
        h.registry.owned.clear()  # led by another broker now: the client must move
        not_here = h.membership.heartbeat("g", generation, member, None)
        assert not_here == ErrorCode.NOT_COORDINATOR

    asyncio.run(scenario())


def test_leave_group_gives_a_coordinator_error_for_the_group_alone() -> None:
    async def scenario() -> None:
        h = Harness()
        member, _ = await h.join_and_sync("g")
        h.registry.loading[0] = 0
        leaving = [(member, None), ("other", "instance-1")]
        assert h.membership.leave("g", leaving) == (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, [])
        del h.registry.loading[0]
        h.registry.owned.clear()
        assert h.membership.leave("g", leaving) == (ErrorCode.NOT_COORDINATOR, [])

    asyncio.run(scenario())
