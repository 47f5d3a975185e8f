"""A coordinator over a fake offsets store and a clock the test moves by hand."""

from __future__ import annotations

import asyncio
import contextlib
import random
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from epochlog.coordinator.commits import CommitRequest
from epochlog.coordinator.membership import JoinRequest, Membership
from epochlog.coordinator.offsets import OffsetManager
from epochlog.coordinator.records import decode_key
from epochlog.coordinator.registry import GroupRegistry
from epochlog.coordinator.settings import CoordinatorSettings
from epochlog.protocol.errors import ErrorCode
from support.clock_timeout import sleep_timeout

MINUTE_MS = 60_000


class ManualClock:
    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self.ms = start_ms

    def time_ms(self) -> int:
        return self.ms

    def monotonic(self) -> float:
        return self.ms / 1000

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(0)

    def timeout(self, seconds: float) -> contextlib.AbstractAsyncContextManager[None]:
        return sleep_timeout(self, seconds)

    def advance(self, ms: int) -> None:
        self.ms += ms


@dataclass
class FakeStore:
    """Accepts every append; remembers what was written (key, value)."""

    written: list[tuple[Any, bytes | None]] = field(default_factory=list)
    next_offset: int = 0
    # The transactional producer of each append (None for plain ones).
    producers: list[Any] = field(default_factory=list)

    def partition(self, index: int) -> Any:
        return SimpleNamespace(is_leader=True, leader_epoch=0)

    def led(self) -> dict[int, int]:
        return {}

    def read_all(self, index: int) -> Any:
        return iter(())

    async def append(
        self, index: int, records: list, timeout_s: float, producer: Any = None
    ) -> tuple[ErrorCode, int]:
        self.producers.append(producer)
        base = self.next_offset
        self.next_offset += len(records)
        self.written += [(decode_key(k), v) for k, v in records]
        return ErrorCode.NONE, base

    def tombstones(self) -> list[Any]:
        return [k for k, v in self.written if v is None]


class Harness:
    def __init__(self, **settings: Any) -> None:
        self.clock = ManualClock()
        self.store = FakeStore()
        base = {"num_partitions": 1, "initial_rebalance_delay_ms": 0}
        self.settings = CoordinatorSettings(**{**base, **settings})
        self.registry = GroupRegistry(
            self.store,  # type: ignore[arg-type]
            self.clock,
            random.Random(7),  # type: ignore[arg-type]
            self.settings,
        )
        self.registry.owned[0] = 0
        self.membership = Membership(self.registry)
        self.offsets = OffsetManager(self.registry)

    async def join_and_sync(
        self, group_id: str, topics: tuple[str, ...] = ("t",)
    ) -> tuple[str, int]:
        """One dynamic member joins a consumer group and gets its assignment."""
        from test_group_state_machine import subscription

        request = JoinRequest(
            group_id,
            "",
            None,
            "c",
            "h",
            10_000,
            10_000,
            "consumer",
            [("range", subscription(*topics))],
            False,
        )
        answer = await self.membership.join(request)
        assert answer.error == ErrorCode.NONE, answer
        error, _ = await self.membership.sync(
            group_id,
            answer.generation_id,
            answer.member_id,
            None,
            None,
            None,
            {answer.member_id: b"x"},
        )
        assert error == ErrorCode.NONE
        return answer.member_id, answer.generation_id

    async def commit(
        self,
        group_id: str,
        offsets: dict[tuple[str, int], int],
        member: str = "",
        generation: int = -1,
        epoch: int = -1,
    ) -> dict[tuple[str, int], ErrorCode]:
        return await self.offsets.commit(
            group_id,
            generation,
            member,
            None,
            {k: CommitRequest(v, epoch, None) for k, v in offsets.items()},
        )

    def committed(self, group_id: str) -> dict[tuple[str, int], int]:
        _, found = self.offsets.fetch(group_id, None)
        return {k: f.offset for k, f in found.items()}
