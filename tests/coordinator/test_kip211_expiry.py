"""KIP-211 with a clock the test moves: offsets of a group expire together, the
retention after the group became Empty, never while it has members."""

from __future__ import annotations

import asyncio

from coordinator_fakes import MINUTE_MS, Harness

from epochlog.coordinator.group import GroupState
from epochlog.coordinator.records import GroupKey, OffsetKey

RETENTION_MIN = 10080
RETENTION_MS = RETENTION_MIN * MINUTE_MS


def harness() -> Harness:
    return Harness(retention_ms=RETENTION_MS)


def test_an_active_group_that_commits_rarely_keeps_its_offsets_past_the_retention() -> None:
    async def scenario() -> None:
        h = harness()
        member, generation = await h.join_and_sync("g")
        await h.commit("g", {("t", 0): 5}, member, generation)
        for _ in range(5):  # five retentions pass; the member keeps heartbeating
            h.clock.advance(RETENTION_MS)
            assert h.membership.heartbeat("g", generation, member, None).name == "NONE"
            assert await h.offsets.expire() == 0
        assert h.committed("g") == {("t", 0): 5}
        assert h.store.tombstones() == []

    asyncio.run(scenario())


def test_stable_group_expires_only_topics_it_no_longer_subscribes_to_from_commit_time() -> None:
    async def scenario() -> None:
        h = harness()
        member, generation = await h.join_and_sync("g", topics=("t",))
        await h.commit("g", {("t", 0): 5, ("old", 0): 9}, member, generation)
        h.clock.advance(RETENTION_MS - 1)
        h.membership.heartbeat("g", generation, member, None)
        assert await h.offsets.expire() == 0
        h.clock.advance(1)
        h.membership.heartbeat("g", generation, member, None)
        assert await h.offsets.expire() == 1
        assert h.committed("g") == {("t", 0): 5}
        assert h.store.tombstones() == [OffsetKey("g", "old", 0)]
        # What epochlog_group_offsets_expired reports.
        assert h.offsets.expired == 1

    asyncio.run(scenario())


def test_offsets_expire_together_the_retention_after_the_group_became_empty() -> None:
    async def scenario() -> None:
        h = harness()
        member, generation = await h.join_and_sync("g")
        await h.commit("g", {("t", 0): 5}, member, generation)
        h.clock.advance(RETENTION_MS)  # old commit, but the group is active
        h.membership.heartbeat("g", generation, member, None)
        await h.commit("g", {("t", 1): 7}, member, generation)
        h.clock.advance(MINUTE_MS)
        h.membership.leave("g", [(member, None)])
        group = h.registry.groups["g"]
        assert group.is_(GroupState.EMPTY)
        empty_since = h.clock.time_ms()
        h.clock.advance(RETENTION_MS - 1)
        assert await h.offsets.expire() == 0
        assert h.committed("g") == {("t", 0): 5, ("t", 1): 7}
        h.clock.advance(1)
        assert h.clock.time_ms() - empty_since == RETENTION_MS
        assert await h.offsets.expire() == 2
        assert group.is_(GroupState.DEAD) and "g" not in h.registry.groups
        assert set(h.store.tombstones()) == {
            OffsetKey("g", "t", 0),
            OffsetKey("g", "t", 1),
            GroupKey("g"),
        }
        assert h.committed("g") == {}

    asyncio.run(scenario())


def test_rejoining_before_expiry_keeps_the_offsets() -> None:
    async def scenario() -> None:
        h = harness()
        member, generation = await h.join_and_sync("g")
        await h.commit("g", {("t", 0): 5}, member, generation)
        h.membership.leave("g", [(member, None)])
        h.clock.advance(RETENTION_MS - MINUTE_MS)
        member, generation = await h.join_and_sync("g")
        h.clock.advance(2 * RETENTION_MS)
        h.membership.heartbeat("g", generation, member, None)
        assert await h.offsets.expire() == 0
        h.membership.leave("g", [(member, None)])
        h.clock.advance(RETENTION_MS - 1)
        assert await h.offsets.expire() == 0
        assert h.committed("g") == {("t", 0): 5}
        h.clock.advance(1)
        assert await h.offsets.expire() == 1

    asyncio.run(scenario())


def test_standalone_commits_expire_from_their_own_commit_time() -> None:
    async def scenario() -> None:
        h = harness()
        assert (await h.commit("s", {("t", 0): 1}))[("t", 0)].name == "NONE"
        h.clock.advance(RETENTION_MS // 2)
        await h.commit("s", {("t", 1): 2})
        h.clock.advance(RETENTION_MS // 2)
        assert await h.offsets.expire() == 1
        assert h.committed("s") == {("t", 1): 2}
        h.clock.advance(RETENTION_MS // 2 - 1)
        await h.commit("s", {("t", 1): 3})  # a new commit restarts its count
        h.clock.advance(RETENTION_MS // 2)
        assert await h.offsets.expire() == 0
        h.clock.advance(RETENTION_MS)
        assert await h.offsets.expire() == 1
        assert "s" not in h.registry.groups

    asyncio.run(scenario())


def test_a_rebalancing_group_expires_nothing() -> None:
    async def scenario() -> None:
        h = harness()
        member, generation = await h.join_and_sync("g", topics=("t",))
        await h.commit("g", {("other", 0): 1}, member, generation)
        group = h.registry.groups["g"]
        h.membership.prepare_rebalance(group, "test")
        h.clock.advance(2 * RETENTION_MS)
        assert await h.offsets.expire() == 0

    asyncio.run(scenario())
