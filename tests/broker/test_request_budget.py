"""RequestBytesBudget: small frames are admitted while large ones wait, large ones
together hold at most three quarters of the budget and take turns in the order they
asked, and a waiter whose connection goes away leaves nothing held or blocked."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from epochlog.broker.request_budget import SMALL_REQUEST_BYTES, RequestBytesBudget

LIMIT = 4_000_000
LARGE = 1_500_000  # above SMALL_REQUEST_BYTES: two fill what large frames may hold
SMALL = 1_000


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(scenario(), 10))


async def waiting(budget: RequestBytesBudget, size: int) -> asyncio.Task[None]:
    """An acquire that has run as far as it can."""
    task = asyncio.ensure_future(budget.acquire(size))
    for _ in range(3):
        await asyncio.sleep(0)
    return task


def test_small_frames_are_admitted_while_large_ones_hold_all_they_may() -> None:
    async def scenario() -> None:
        budget = RequestBytesBudget(LIMIT)
        await budget.acquire(LARGE)
        await budget.acquire(LARGE)
        third = await waiting(budget, LARGE)
        assert not third.done()
        assert budget.large == 2 * LARGE <= budget.large_limit < 3 * LARGE
        for _ in range(10):
            await asyncio.wait_for(budget.acquire(SMALL), 1)
        assert budget.used == 2 * LARGE + 10 * SMALL
        budget.release(LARGE)
        await asyncio.wait_for(third, 1)
        assert budget.large == 2 * LARGE

    run(scenario)


def test_one_frame_may_hold_half_the_budget_and_no_more() -> None:
    budget = RequestBytesBudget(LIMIT)
    assert budget.share == LIMIT // 2
    assert budget.large_limit == LIMIT * 3 // 4

    async def scenario() -> None:
        await budget.acquire(budget.share)
        with pytest.raises(AssertionError):
            await budget.acquire(budget.share + 1)

    run(scenario)


def test_small_frames_wait_only_for_the_whole_budget() -> None:
    async def scenario() -> None:
        budget = RequestBytesBudget(20 * SMALL_REQUEST_BYTES)
        for _ in range(20):
            await budget.acquire(SMALL_REQUEST_BYTES)
        late = await waiting(budget, SMALL)
        assert not late.done()
        budget.release(SMALL_REQUEST_BYTES)
        await asyncio.wait_for(late, 1)
        assert budget.used == 19 * SMALL_REQUEST_BYTES + SMALL

    run(scenario)


def test_large_frames_take_turns_in_the_order_they_asked() -> None:
    async def scenario() -> None:
        budget = RequestBytesBudget(LIMIT)
        await budget.acquire(LARGE)
        await budget.acquire(1_000_000)
        admitted: list[int] = []

        async def ask(size: int) -> None:
            await budget.acquire(size)
            admitted.append(size)

        bigger = asyncio.ensure_future(ask(LARGE))
        await asyncio.sleep(0)
        # Fits beside the two held, but asked after a large frame that does not.
        smaller = asyncio.ensure_future(ask(SMALL_REQUEST_BYTES + 1))
        for _ in range(3):
            await asyncio.sleep(0)
        assert admitted == []
        budget.release(1_000_000)
        await asyncio.wait_for(bigger, 1)
        budget.release(LARGE)
        await asyncio.wait_for(smaller, 1)
        assert admitted == [LARGE, SMALL_REQUEST_BYTES + 1]

    run(scenario)


def test_a_waiter_that_goes_away_lets_the_next_in_and_holds_nothing() -> None:
    async def scenario() -> None:
        budget = RequestBytesBudget(LIMIT)
        await budget.acquire(LARGE)
        await budget.acquire(1_000_000)
        gone = await waiting(budget, LARGE)
        after = await waiting(budget, SMALL_REQUEST_BYTES + 1)  # fits, but behind it
        assert not after.done()
        gone.cancel()
        await asyncio.wait_for(after, 1)
        assert budget.used == LARGE + 1_000_000 + SMALL_REQUEST_BYTES + 1
        assert not budget._waiting

    run(scenario)


def test_a_waiter_admitted_as_it_goes_away_gives_its_bytes_back() -> None:
    async def scenario() -> None:
        budget = RequestBytesBudget(LIMIT)
        await budget.acquire(LARGE)
        await budget.acquire(LARGE)
        gone = await waiting(budget, LARGE)
        budget.release(LARGE)  # admits it; it has not run since
        gone.cancel()
        with pytest.raises(asyncio.CancelledError):
            await gone
        assert (budget.used, budget.large) == (LARGE, LARGE)

    run(scenario)
