"""``epochlog sim``: run seeds through the simulator and say which invariant broke.
Outside the simulated world (it reads the wall clock and writes files), as the other
command-line entry points are.

Each seed gives one line (its history's digest, so a replay can be compared byte for
byte); a failing seed also prints its fault schedule and every finding, and its
history is written to ``--trace-dir``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from epochlog.sim.faults import FAULT_KINDS

WORKLOADS = ("produce", "consume", "groups")

if TYPE_CHECKING:  # the simulator loads the whole broker: only when a run starts
    from epochlog.sim.faults import Fault
    from epochlog.sim.run import SimOptions, SimResult


def add_sim_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seed", type=int, default=1, help="the first seed (default 1)")
    parser.add_argument("--seeds", type=int, default=1, help="how many seeds from --seed")
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument(
        "--duration", type=float, default=30.0, help="simulated seconds of workload and faults"
    )
    parser.add_argument("--rate", type=int, default=200, help="records per simulated second")
    parser.add_argument(
        "--faults",
        default=",".join(FAULT_KINDS),
        help=f"comma-separated, from {','.join(FAULT_KINDS)} (empty: none)",
    )
    parser.add_argument(
        "--workload",
        default="produce,consume",
        help="comma-separated: produce,consume (always) and groups (a committing group)",
    )
    parser.add_argument(
        "--jobs", type=int, default=1, help="processes to run seeds in (a swarm: default 1)"
    )
    parser.add_argument("--trace-dir", default=".", help="where failing seeds' histories go")
    parser.add_argument(
        "--save-regression",
        metavar="DIR",
        help="shrink each failing seed's fault schedule and save it under DIR as JSON",
    )
    parser.add_argument("--verbose", action="store_true", help="the brokers' warnings too")


def options_from_args(args: argparse.Namespace) -> SimOptions:
    from epochlog.sim.run import SimOptions

    faults = tuple(f for f in args.faults.split(",") if f)
    unknown = sorted(set(faults) - set(FAULT_KINDS))
    if unknown:
        raise ValueError(f"unknown faults: {', '.join(unknown)}")
    workload = tuple(w for w in args.workload.split(",") if w)
    if not {"produce", "consume"} <= set(workload) or set(workload) - set(WORKLOADS):
        raise ValueError(f"workload must hold produce and consume, from {','.join(WORKLOADS)}")
    return SimOptions(
        args.brokers, args.partitions, args.duration, args.rate, faults, workload=workload
    )


def run_from_args(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=logging.WARNING if args.verbose else logging.CRITICAL,
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        options = options_from_args(args)
    except ValueError as exc:
        print(f"epochlog sim: {exc}", file=sys.stderr)
        return 2
    seeds = range(args.seed, args.seed + args.seeds)
    failed: list[int] = []
    broken: dict[str, int] = {}
    started = time.perf_counter()
    for result, wall_s in _results(seeds, options, args.jobs):
        print(summary(result, options, wall_s), flush=True)
        if not result.ok:
            failed.append(result.seed)
            print(details(result, write_trace(result, args.trace_dir)), flush=True)
            if args.save_regression:
                print(_shrunk(result, options, args.save_regression), flush=True)
            for name, findings in result.findings.items():
                broken[name] = broken.get(name, 0) + bool(findings)
    wall_s = time.perf_counter() - started
    print(
        f"{len(seeds) - len(failed)} of {len(seeds)} seeds held every invariant "
        f"({len(seeds) * 60 / wall_s:.1f} seeds a minute, {args.jobs} processes)"
    )
    for name, count in sorted(broken.items()):
        print(f"  {name:<22} broken in {count} seeds")
    if failed:
        print("  failing seeds: " + " ".join(str(s) for s in failed))
    return 1 if failed else 0


def _results(seeds: range, options: SimOptions, jobs: int) -> Iterator[tuple[SimResult, float]]:
    """Each seed's result and wall time, in seed order, from ``jobs`` processes."""
    if jobs <= 1:
        yield from map(_timed_run, seeds, [options] * len(seeds))
        return
    with ProcessPoolExecutor(jobs) as pool:
        yield from pool.map(_timed_run, seeds, [options] * len(seeds))


def _timed_run(seed: int, options: SimOptions) -> tuple[SimResult, float]:
    from epochlog.sim.run import run_seed

    started = time.perf_counter()
    result = run_seed(seed, options)
    return result, time.perf_counter() - started


def _shrunk(result: SimResult, options: SimOptions, directory: str) -> str:
    from epochlog.sim.shrink import broken, shrink

    names = broken(result)
    schedule = shrink(result.seed, options, result.schedule, names)
    path = save_regression(directory, result.seed, options, schedule, names)
    faults = "; ".join(str(f).strip() for f in schedule) or "no fault"
    return f"  shrunk to {len(schedule)} of {len(result.schedule)} faults ({faults}): {path}"


def summary(result: SimResult, options: SimOptions, wall_s: float) -> str:
    acked = sum(1 for e in result.history if e[0] == "ack")
    verdict = "ok" if result.ok else "FAILED"
    return (
        f"seed {result.seed}: {verdict:<6} {acked:,} records acknowledged, "
        f"{len(result.schedule)} faults, {options.duration:.0f} simulated s in "
        f"{wall_s:.1f} s, history {result.digest}"
    )


def details(result: SimResult, trace_path: str) -> str:
    lines = ["  fault schedule:"]
    lines += [f"    {fault}" for fault in result.schedule] or ["    (none)"]
    for name, findings in result.findings.items():
        if findings:
            lines.append(f"  {name}: {len(findings)} violations, first: {findings[0]}")
    lines.append(f"  history: {trace_path}")
    return "\n".join(lines)


def write_trace(result: SimResult, directory: str) -> str:
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"sim-seed-{result.seed}.trace")
    with open(path, "w") as out:
        out.write(f"# seed {result.seed}, history {result.digest}\n")
        for fault in result.schedule:
            out.write(f"# fault {fault}\n")
        for event in result.history:
            out.write(f"{event!r}\n")
    return path


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
    from epochlog.sim.faults import Fault
    from epochlog.sim.run import SimOptions

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
