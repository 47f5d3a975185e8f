"""``in_steps`` runs long work on the loop and lets other work run whenever it has held
the loop ``STEP_S``; on a clock where no time passes it runs in one go."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Generator

from epochlog.seams.real import RealClock
from epochlog.seams.tasks import STEP_S, Step, drain, in_steps


class SlowClock(RealClock):
    """Every look at the clock finds a step's worth of time gone."""

    def __init__(self, per_look_s: float) -> None:
        self.now = 0.0
        self.per_look_s = per_look_s

    def monotonic(self) -> float:
        self.now += self.per_look_s
        return self.now


def work(log: list[str], n: int) -> Generator[None, None, str]:
    for i in range(n):
        log.append(f"step {i}")
        yield
    return "done"


async def run_beside_other_work(clock: RealClock) -> tuple[str, list[str]]:
    log: list[str] = []

    async def other() -> None:
        for _ in range(3):
            log.append("other")
            await asyncio.sleep(0)

    beside = asyncio.create_task(other())
    result = await in_steps(clock, work(log, 3))
    await beside
    return result, log


def test_long_work_lets_other_work_in_once_it_held_the_loop_a_step() -> None:
    result, log = asyncio.run(run_beside_other_work(SlowClock(STEP_S)))
    assert result == "done"
    assert log[:2] == ["step 0", "other"]


def test_long_work_runs_in_one_go_while_no_time_passes() -> None:
    result, log = asyncio.run(run_beside_other_work(SlowClock(0.0)))
    assert result == "done"
    assert log[:3] == ["step 0", "step 1", "step 2"]


def test_disk_work_a_step_hands_out_runs_through_off_loop() -> None:
    ran: list[str] = []

    def steps() -> Generator[Step, None, None]:
        yield lambda: ran.append("fsync")
        ran.append("after")

    async def off_loop(work: Callable[[], None]) -> None:
        ran.append("off the loop")
        work()

    asyncio.run(in_steps(SlowClock(0.0), steps(), off_loop))
    assert ran == ["off the loop", "fsync", "after"]
    ran.clear()
    drain(steps())
    assert ran == ["fsync", "after"]
