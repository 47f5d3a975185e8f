"""Shrinking a failing seed's fault schedule, and regression files that replay it.

A failing schedule is cut down while the run still breaks one of the same checkers:
faults are dropped one at a time (from the first), then each remaining fault's length
is halved while it still fails. The seed stays, so the workload and every other random
choice are those of the original run; what is left is the shortest schedule found that
still shows the bug, saved as JSON that ``tests/sim/test_sim_regressions.py`` replays.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import asdict, replace
from typing import Any

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


def save_regression(
    directory: str, seed: int, options: SimOptions, schedule: list[Fault], names: set[str]
) -> str:
    """Write the run as ``seed-N.json`` under ``directory``; returns its path."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"seed-{seed}.json")
    record = {
        "seed": seed,
        "options": asdict(options),
        "schedule": [asdict(f) for f in schedule],
        "broke": sorted(names),
    }
    with open(path, "w") as out:
        json.dump(record, out, indent=2, sort_keys=True)
        out.write("\n")
    return path


def load_regression(path: str) -> tuple[int, SimOptions, list[Fault], set[str]]:
    """A saved run: its seed, options, schedule and the checkers it broke then."""
    with open(path) as source:
        record: dict[str, Any] = json.load(source)
    options = dict(record["options"])
    options["faults"] = tuple(options["faults"])
    return (
        int(record["seed"]),
        SimOptions(**options),
        [Fault(**f) for f in record["schedule"]],
        set(record["broke"]),
    )
