"""Offsets committed inside a transaction (TxnOffsetCommit): written as the producer's
transactional batch, invisible until its marker, then committed or dropped; KIP-320's
leader epoch kept; OffsetFetch's require_stable; no expiry while undecided."""

from __future__ import annotations

import asyncio

from coordinator_fakes import Harness

from epochlog.coordinator.commits import CommitRequest
from epochlog.coordinator.store import TxnProducer
from epochlog.protocol.errors import ErrorCode

PRODUCER = TxnProducer(producer_id=42, producer_epoch=3)


async def txn_commit(
    h: Harness,
    group: str,
    offsets: dict[tuple[str, int], int],
    producer: TxnProducer = PRODUCER,
    generation: int = -1,
    member: str = "",
) -> dict[tuple[str, int], ErrorCode]:
    return await h.offsets.txn_commit(
        group,
        producer,
        generation,
        member,
        None,
        {k: CommitRequest(v, 5, "m") for k, v in offsets.items()},
    )


def test_txn_offsets_are_pending_until_the_commit_marker() -> None:
    async def scenario() -> None:
        h = Harness()
        await h.commit("g", {("t", 0): 3})
        answers = await txn_commit(h, "g", {("t", 0): 10, ("t", 1): 20})
        assert answers == {("t", 0): ErrorCode.NONE, ("t", 1): ErrorCode.NONE}
        assert h.store.producers[-1] == PRODUCER
        assert h.committed("g") == {("t", 0): 3}
        _, stable = h.offsets.fetch("g", [("t", 0), ("t", 1)], require_stable=True)
        assert {k: f.error for k, f in stable.items()} == {
            ("t", 0): ErrorCode.UNSTABLE_OFFSET_COMMIT,
            ("t", 1): ErrorCode.UNSTABLE_OFFSET_COMMIT,
        }
        h.offsets.complete_txn_offsets(0, PRODUCER.producer_id, commit=True)
        assert h.committed("g") == {("t", 0): 10, ("t", 1): 20}
        _, found = h.offsets.fetch("g", [("t", 0)], require_stable=True)
        assert (found[("t", 0)].offset, found[("t", 0)].leader_epoch) == (10, 5)

    asyncio.run(scenario())


def test_aborted_txn_offsets_are_dropped() -> None:
    async def scenario() -> None:
        h = Harness()
        await h.commit("g", {("t", 0): 3})
        await txn_commit(h, "g", {("t", 0): 10})
        h.offsets.complete_txn_offsets(0, PRODUCER.producer_id, commit=False)
        assert h.committed("g") == {("t", 0): 3}
        assert not h.registry.groups["g"].pending_txn_offsets

    asyncio.run(scenario())


def test_a_later_plain_commit_wins_over_an_earlier_txn_commit() -> None:
    async def scenario() -> None:
        h = Harness()
        await txn_commit(h, "g", {("t", 0): 10})
        await h.commit("g", {("t", 0): 15})
        h.offsets.complete_txn_offsets(0, PRODUCER.producer_id, commit=True)
        assert h.committed("g") == {("t", 0): 15}

    asyncio.run(scenario())


def test_member_checks_of_a_txn_commit() -> None:
    async def scenario() -> None:
        h = Harness()
        member, generation = await h.join_and_sync("g")
        ok = await txn_commit(h, "g", {("t", 0): 1}, generation=generation, member=member)
        assert ok == {("t", 0): ErrorCode.NONE}
        stale = await txn_commit(h, "g", {("t", 0): 1}, generation=generation + 1, member=member)
        assert stale == {("t", 0): ErrorCode.ILLEGAL_GENERATION}
        stranger = await txn_commit(h, "g", {("t", 0): 1}, generation=generation, member="x")
        assert stranger == {("t", 0): ErrorCode.UNKNOWN_MEMBER_ID}

    asyncio.run(scenario())


def test_offsets_do_not_expire_while_a_txn_commit_is_undecided() -> None:
    async def scenario() -> None:
        h = Harness(retention_ms=1000)
        await h.commit("g", {("t", 0): 3})
        await txn_commit(h, "g", {("t", 1): 10})
        h.clock.advance(10_000)
        assert await h.offsets.expire() == 0
        h.offsets.complete_txn_offsets(0, PRODUCER.producer_id, commit=True)
        h.clock.advance(10_000)
        assert await h.offsets.expire() == 2

    asyncio.run(scenario())
