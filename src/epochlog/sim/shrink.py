"""Shrinking a failing seed's fault schedule, and regression files that replay it.

A failing schedule is cut down while the run still breaks one of the same checkers:
faults are dropped one at a time (from the first), then each remaining fault's length
is halved while it still fails. The seed stays, so the workload and every other random
choice are those of the original run; what is left is the shortest schedule found that
still shows the bug, which ``epochlog sim --save-regression`` writes as JSON
(``command.save_regression``) for ``tests/sim/test_sim_regressions.py`` to replay.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from epochlog.sim.faults import Fault
from epochlog.sim.run import SimOptions, SimResult, run_seed

Run = Callable[[int, SimOptions, list[Fault]], SimResult]
# Halving stops below this length (simulated seconds): shorter faults show nothing new.
SHORTEST_S = 0.25


def broken(result: SimResult) -> set[str]:
    return {name for name, found in result.findings.items() if found}


def shrink(
    seed: int,
    options: SimOptions,
    schedule: list[Fault],
    names: set[str],
    run: Run = run_seed,
) -> list[Fault]:
    """The shortest schedule found under which ``seed`` still breaks one of ``names``."""

    def fails(candidate: list[Fault]) -> bool:
        return bool(broken(run(seed, options, candidate)) & names)

    current = list(schedule)
    i = 0
    while i < len(current):
        candidate = current[:i] + current[i + 1 :]
        if fails(candidate):
            current = candidate
        else:
            i += 1
    for i, fault in enumerate(current):
        while fault.lasts / 2 >= SHORTEST_S:
            shorter = replace(fault, lasts=round(fault.lasts / 2, 3))
            if not fails([*current[:i], shorter, *current[i + 1 :]]):
                break
            fault = current[i] = shorter
    return current
