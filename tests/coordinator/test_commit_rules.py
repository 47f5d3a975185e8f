"""OffsetCommit decisions: generation and member fencing, metadata size, and the KIP-232
opt-in refusal of stale leader epochs and of commits from a re-created topic's
predecessor. Nothing refused is ever stored."""

from __future__ import annotations

import asyncio

from coordinator_fakes import Harness

from epochlog.coordinator.commits import (
    CommitRequest,
    is_from_earlier_topic,
    is_stale_epoch,
    partition_commit_error,
)
from epochlog.coordinator.group import CommittedOffset, GroupState
from epochlog.protocol.errors import ErrorCode


def test_wrong_generation_or_member_is_refused_and_nothing_stored() -> None:
    async def scenario() -> None:
        h = Harness()
        member, generation = await h.join_and_sync("g")
        answers = await h.commit("g", {("t", 0): 5}, member, generation + 1)
        assert answers == {("t", 0): ErrorCode.ILLEGAL_GENERATION}
        answers = await h.commit("g", {("t", 0): 5}, "stranger", generation)
        assert answers == {("t", 0): ErrorCode.UNKNOWN_MEMBER_ID}
        answers = await h.commit("nogroup", {("t", 0): 5}, "m", 3)
        assert answers == {("t", 0): ErrorCode.ILLEGAL_GENERATION}
        assert h.store.written[-1][0].__class__.__name__ == "GroupKey"  # only the sync
        assert h.committed("g") == {}

    asyncio.run(scenario())


def test_commit_during_completing_rebalance_is_rebalance_in_progress() -> None:
    async def scenario() -> None:
        h = Harness()
        member, generation = await h.join_and_sync("g")
        group = h.registry.groups["g"]
        group.members[member].awaiting_join = True
        h.membership.prepare_rebalance(group, "test")
        h.membership.maybe_complete_join(group)
        answers = await h.commit("g", {("t", 0): 5}, member, group.generation_id)
        assert answers == {("t", 0): ErrorCode.REBALANCE_IN_PROGRESS}

    asyncio.run(scenario())


def test_older_generation_commit_during_rebalance_is_illegal_generation() -> None:
    """The generation is checked before the group state (Kafka's validateOffsetCommit):
    a member still holding the previous generation learns it lost it, in either
    rebalance state; one holding the current generation may commit while the group
    prepares, and waits while it completes."""

    async def scenario() -> None:
        h = Harness()
        member, old = await h.join_and_sync("g")
        group = h.registry.groups["g"]
        group.members[member].awaiting_join = True
        h.membership.prepare_rebalance(group, "test")
        assert group.is_(GroupState.PREPARING_REBALANCE)
        answers = await h.commit("g", {("t", 0): 5}, member, old - 1)
        assert answers == {("t", 0): ErrorCode.ILLEGAL_GENERATION}
        assert await h.commit("g", {("t", 0): 5}, member, old) == {("t", 0): ErrorCode.NONE}
        h.membership.maybe_complete_join(group)
        assert group.is_(GroupState.COMPLETING_REBALANCE)
        answers = await h.commit("g", {("t", 0): 6}, member, old)
        assert answers == {("t", 0): ErrorCode.ILLEGAL_GENERATION}
        answers = await h.commit("g", {("t", 0): 6}, "", -1)
        assert answers == {("t", 0): ErrorCode.UNKNOWN_MEMBER_ID}
        assert h.committed("g") == {("t", 0): 5}

    asyncio.run(scenario())


def test_oversized_metadata_is_refused_per_partition() -> None:
    async def scenario() -> None:
        h = Harness(max_metadata_bytes=4)
        answers = await h.offsets.commit(
            "s",
            -1,
            "",
            None,
            {("t", 0): CommitRequest(1, -1, "12345"), ("t", 1): CommitRequest(2, -1, "1234")},
        )
        assert answers == {
            ("t", 0): ErrorCode.OFFSET_METADATA_TOO_LARGE,
            ("t", 1): ErrorCode.NONE,
        }
        assert h.committed("s") == {("t", 1): 2}

    asyncio.run(scenario())


def test_stale_epoch_rule() -> None:
    current = CommittedOffset(100, 5, "", 0)
    assert is_stale_epoch(current, CommitRequest(100, 4, None))
    assert is_stale_epoch(current, CommitRequest(150, 4, None))
    assert not is_stale_epoch(current, CommitRequest(50, 4, None))  # a deliberate rewind
    assert not is_stale_epoch(current, CommitRequest(150, 5, None))
    assert not is_stale_epoch(current, CommitRequest(150, -1, None))
    assert not is_stale_epoch(None, CommitRequest(150, 1, None))
    stale = CommitRequest(120, 4, None)
    assert partition_commit_error(current, stale, 4096, False) == ErrorCode.NONE
    assert partition_commit_error(current, stale, 4096, True) == ErrorCode.INVALID_LEADER_EPOCH


def test_partition_epoch_rule_a_commit_from_before_a_recreation() -> None:
    """KIP-232's partition epoch by leader epochs: the re-created partition has had epochs
    0..1, so a commit in epoch 4 was read from the deleted topic; and an offset committed
    for the deleted topic (epoch 5) fences nothing of the new one."""
    assert is_from_earlier_topic(CommitRequest(120, 4, None, 1))
    assert not is_from_earlier_topic(CommitRequest(120, 1, None, 1))
    assert not is_from_earlier_topic(CommitRequest(120, 4, None, -1))
    assert not is_from_earlier_topic(CommitRequest(120, -1, None, 1))
    old_topic = CommittedOffset(100, 5, "", 0)
    new_topic_commit = CommitRequest(120, 0, None, 1)
    assert not is_stale_epoch(old_topic, new_topic_commit)
    assert is_stale_epoch(old_topic, CommitRequest(120, 4, None, 5))
    recreated = CommitRequest(120, 4, None, 1)
    assert partition_commit_error(old_topic, recreated, 4096, False) == ErrorCode.NONE
    assert (
        partition_commit_error(old_topic, recreated, 4096, True)
        == ErrorCode.INVALID_PARTITION_EPOCH
    )
    assert partition_commit_error(old_topic, new_topic_commit, 4096, True) == ErrorCode.NONE


def test_stale_commits_are_refused_only_when_the_broker_opts_in() -> None:
    async def scenario(reject: bool) -> dict:
        h = Harness(reject_stale_leader_epoch=reject)
        await h.commit("s", {("t", 0): 100}, epoch=5)
        answers = await h.commit("s", {("t", 0): 120}, epoch=4)
        return {"answer": answers[("t", 0)], "committed": h.committed("s")}

    assert asyncio.run(scenario(False)) == {
        "answer": ErrorCode.NONE,
        "committed": {("t", 0): 120},
    }
    assert asyncio.run(scenario(True)) == {
        "answer": ErrorCode.INVALID_LEADER_EPOCH,
        "committed": {("t", 0): 100},
    }
