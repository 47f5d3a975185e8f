"""Shared fixtures: real disk on tmp_path, a clock tests advance by hand, batch builders."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from epochlog.protocol.records import build_batch
from epochlog.seams.real import OsDisk
from epochlog.storage.config import LogConfig
from epochlog.storage.log import Log
from support.clock_timeout import sleep_timeout


class FakeClock:
    def __init__(self, now_ms: int = 1_700_000_000_000) -> None:
        self.now_ms = now_ms
        self.slept: list[float] = []

    def time_ms(self) -> int:
        return self.now_ms

    def monotonic(self) -> float:
        return self.now_ms / 1000

    def timeout(self, seconds: float) -> contextlib.AbstractAsyncContextManager[None]:
        return sleep_timeout(self, seconds)

    def advance(self, ms: int) -> None:
        self.now_ms += ms

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now_ms += int(seconds * 1000)
        await asyncio.sleep(0)  # yield, as a real sleep would


def batch(n: int = 1, ts: int = 1000, size: int = 10, **kwargs: object) -> bytearray:
    """A produced batch of ``n`` records with timestamps ts, ts+1, ..."""
    records = [(None, bytes(size), [], ts + i) for i in range(n)]
    return bytearray(build_batch(records, **kwargs))


@pytest.fixture
def disk() -> OsDisk:
    return OsDisk()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def open_log(disk: OsDisk, clock: FakeClock, tmp_path):
    def _open(config: LogConfig | None = None, **kwargs: object) -> Log:
        return Log.open(disk, clock, str(tmp_path / "t-0"), "t", 0, config or LogConfig(), **kwargs)

    return _open
