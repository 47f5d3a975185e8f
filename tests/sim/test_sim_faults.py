"""The faults a simulated run can do beyond kills and partitions: a paused host (its
work held back, the rest running on), a host's clock stepped and drifting (monotonic
never backwards), a disk whose crash garbles the torn tail and whose bytes rot. Each is
a function of the seed: a run with all of them replays byte for byte."""

from __future__ import annotations

import asyncio
import contextlib
import random

from epochlog.sim.disk import SimDisk
from epochlog.sim.faults import FAULT_KINDS, Fault
from epochlog.sim.loop import SimClock, run_on_host, run_simulated
from epochlog.sim.run import SimOptions, run_seed


def test_a_paused_host_does_nothing_until_resumed_while_the_others_run_on() -> None:
    async def main(clock: SimClock) -> dict[str, list[float]]:
        ticks: dict[str, list[float]] = {"a": [], "b": []}

        async def ticker(name: str) -> None:
            while clock.monotonic() < 10:
                await clock.sleep(1)
                ticks[name].append(clock.monotonic())

        tasks = [run_on_host(name, ticker(name)) for name in ticks]
        loop = asyncio.get_running_loop()
        await clock.sleep(2.5)
        loop.pause_host("a")  # type: ignore[attr-defined]
        await clock.sleep(5)
        loop.resume_host("a")  # type: ignore[attr-defined]
        await asyncio.gather(*tasks)
        return ticks

    ticks = run_simulated(main)
    assert ticks["b"] == [float(s) for s in range(1, 11)]
    # Paused from 2.5 s to 7.5 s: the tick due at 3 s runs late, at the resume.
    assert ticks["a"] == [1.0, 2.0, 7.5, 8.5, 9.5, 10.5]


def test_a_host_clock_steps_and_drifts_and_its_monotonic_never_goes_back() -> None:
    async def main(clock: SimClock) -> list[tuple[float, float, int]]:
        host = clock.for_host()
        seen = [(clock.monotonic(), host.monotonic(), host.time_ms() - clock.time_ms())]
        host.step(60_000)
        host.drift(2.0)
        await host.sleep(4)  # 2 virtual seconds at twice the rate
        seen.append((clock.monotonic(), host.monotonic(), host.time_ms() - clock.time_ms()))
        # What a producer stamps its records with reads the same stepped, drifted clock.
        assert host.time_ns() // 1_000_000 == host.time_ms() != clock.time_ms()
        assert clock.time_ns() // 1_000_000 == clock.time_ms()
        host.drift(0.5)
        await clock.sleep(2)
        seen.append((clock.monotonic(), host.monotonic(), host.time_ms() - clock.time_ms()))
        return seen

    assert run_simulated(main) == [(0.0, 0.0, 0), (2.0, 4.0, 62_000), (4.0, 5.0, 61_000)]


def test_a_garbled_crash_tears_the_unsynced_tail_into_garbage_and_rot_flips_bytes() -> None:
    disk = SimDisk(random.Random(1))
    view = disk.view("/h")
    view.makedirs("/h/t-0")
    segment = view.open("/h/t-0/00000000000000000000.log")
    segment.append(b"a" * 100)
    segment.fsync()
    segment.append(b"b" * 50)
    disk.crash(view, random.Random(7))
    data = disk.view("/h").read_file("/h/t-0/00000000000000000000.log")
    assert data[:100] == b"a" * 100 and 100 < len(data) <= 150
    assert data[100:] != b"b" * (len(data) - 100), "the kept tail is not garbled"
    flipped = disk.rot("/h", random.Random(2), flips=2)
    after = disk.view("/h").read_file("/h/t-0/00000000000000000000.log")
    assert [p for p, _ in flipped] == ["/h/t-0/00000000000000000000.log"] * 2
    assert {i for i in range(len(data)) if after[i] != data[i]} == {i for _, i in flipped}


def test_every_fault_kind_replays_byte_for_byte_and_holds() -> None:
    options = SimOptions(duration=12.0, faults=FAULT_KINDS)
    schedule = [
        Fault(1.0, "pause", 0, 5.0),
        Fault(6.5, "clock", 1, 2.0, salt=11),
        Fault(8.0, "disk", 2, 1.5, salt=12),
    ]
    first, again = run_seed(31, options, schedule), run_seed(31, options, schedule)
    assert first.digest == again.digest
    assert first.ok, first.findings
    assert any(e[0] == "rot" for e in first.history)


def test_a_wait_to_a_deadline_on_a_drifted_clock_ends() -> None:
    """Wait until this clock reaches a deadline, as a long-polling fetch does: with the
    drifted clock's rounding, a timer could end a hair before the deadline on it, and
    the wait be started again at the same virtual instant for ever."""

    async def main(clock: SimClock) -> int:
        host = clock.for_host()
        rounds = 0
        for i in range(300):
            await clock.sleep(0.0137 * (i % 7 + 1))
            host.drift((1.25, 0.8, 2.0, 1.0)[i % 4])
            deadline = host.monotonic() + 0.5 / (i + 1)
            while (remaining := deadline - host.monotonic()) > 0:
                with contextlib.suppress(TimeoutError):
                    async with host.timeout(remaining):
                        await asyncio.Event().wait()
                rounds += 1
        return rounds

    assert run_simulated(main) >= 300


def test_a_partition_reassigned_away_and_back_replays_byte_for_byte_and_holds() -> None:
    """KIP-455 under the simulator: each move is accepted, the replica moved off is
    retired (what it held above its high watermark quarantined, the rest deleted) and
    made again from the leader when it moves back; nothing acknowledged is lost, no
    truncation goes unquarantined."""
    options = SimOptions(duration=16.0, faults=("reassign",))
    schedule = [Fault(2.0, "reassign", 0, 5.0, salt=3), Fault(9.0, "reassign", 1, 3.0, salt=4)]
    first, again = run_seed(5, options, schedule), run_seed(5, options, schedule)
    assert first.digest == again.digest
    assert first.ok, first.findings
    moves = [e for e in first.history if e[0] == "reassign"]
    assert len(moves) == 4 and all(e[-1] == "NONE" for e in moves)
    assert moves[0][2] != moves[0][3], "a partition really moved"
