"""``epochlog chaos``: real broker processes in their own network namespaces, a real
workload, real faults, then the simulator's checkers over what was recorded.

Needs root (namespaces, veths, iptables, tc). Everything it creates carries its pid
(namespaces ``epl-chaos-<pid>-bN``, the bridge ``eplc<pid>``), is removed on the way
out whatever happens (an exception, Ctrl-C, SIGTERM), and what an earlier run killed
before it could clean up is removed at the start.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import glob
import os
import shutil
import signal
import sys
import tempfile
import time
from typing import TYPE_CHECKING

from epochlog.chaos import verdicts
from epochlog.chaos.nemesis import FAULT_KINDS, Fault, Nemesis, draw_schedule
from epochlog.chaos.netns import PREFIX, Network, clean_leftovers
from epochlog.chaos.processes import Brokers, ZooKeeper
from epochlog.client.errors import ClientError
from epochlog.protocol.errors import KafkaError
from epochlog.sim import checkers

if TYPE_CHECKING:  # the workload loads the clients and confluent-kafka: only for a run
    from epochlog.chaos.workload import Workload

TOOLS = ("ip", "tc", "iptables")
HISTORY = "history.txt"
# Broker settings of every chaos run: clean elections only (an acknowledged record is
# then never lost, which lost-write demands), sessions short enough that pauses and
# partitions of a few seconds cost a broker its session.
BROKER_SETTINGS = {
    "zookeeper.session.timeout.ms": "6000",
    "default.replication.factor": "3",
    "offsets.topic.replication.factor": "3",
    "min.insync.replicas": "2",
    "unclean.leader.election.enable": "false",
}


def add_chaos_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--duration", type=float, default=120.0, help="seconds of faults")
    parser.add_argument(
        "--faults",
        default="kill,pause,partition,netem",
        help=f"comma-separated, from {','.join(FAULT_KINDS)} (zookeeper needs --metastore zk)",
    )
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--rate", type=int, default=100, help="records produced a second")
    parser.add_argument("--metastore", choices=("sqlite", "zk"), default="sqlite")
    parser.add_argument("--seed", type=int, default=1, help="the fault schedule's seed")
    parser.add_argument(
        "--data-dir", help="brokers' data, logs and the history (default: a new temp dir)"
    )
    parser.add_argument(
        "--judge",
        metavar="DATA_DIR",
        help="run nothing: judge the history and quarantines an earlier run left in DATA_DIR",
    )


def check_args(args: argparse.Namespace) -> tuple[str, ...]:
    """The fault kinds asked for; raises ValueError on anything this run cannot do."""
    faults = tuple(f for f in args.faults.split(",") if f)
    unknown = sorted(set(faults) - set(FAULT_KINDS))
    if unknown:
        raise ValueError(f"unknown faults: {', '.join(unknown)}")
    if "zookeeper" in faults and args.metastore != "zk":
        raise ValueError("the zookeeper fault needs --metastore zk")
    if args.brokers < 3:
        raise ValueError("--brokers must be at least 3 (replication factor 3, min ISR 2)")
    if os.geteuid() != 0:
        raise ValueError("needs root: network namespaces, veths, iptables and tc")
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing:
        raise ValueError(f"missing {', '.join(missing)}: apt-get install -y iptables iproute2")
    return faults


def run_from_args(args: argparse.Namespace) -> int:
    if args.judge:
        return _report(judge_saved(args.judge), args.judge, f"the run in {args.judge}")
    try:
        faults = check_args(args)
    except ValueError as exc:
        print(f"epochlog chaos: {exc}", file=sys.stderr)
        return 2
    for leftover in clean_leftovers():
        print(f"removed a dead run's {leftover}", flush=True)
    directory = args.data_dir or tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-")
    os.makedirs(directory, exist_ok=True)
    schedule = draw_schedule(args.seed, faults, args.brokers, args.duration)
    print(f"epochlog chaos: seed {args.seed}, {len(schedule)} faults, data in {directory}")
    for fault in schedule:
        print(f"  {fault}")

    try:
        found = asyncio.run(_run(args, schedule, directory))
    except (KeyboardInterrupt, asyncio.CancelledError):
        print("epochlog chaos: interrupted; namespaces, rules and processes removed")
        return 130
    return _report(found, directory, f"seed {args.seed}")


def _report(found: list[verdicts.Verdict], directory: str, run: str) -> int:
    print(verdicts.table(found), flush=True)
    failed = [v.checker for v in found if not v.ok]
    print(f"history: {os.path.join(directory, HISTORY)}")
    if failed:
        print(f"FAILED: {', '.join(failed)} ({run})")
    return 1 if failed else 0


def judge_saved(directory: str) -> list[verdicts.Verdict]:
    """The verdicts on the history and quarantines a run left in ``directory``."""
    from epochlog.chaos.workload import TOPIC

    log_dirs = sorted(glob.glob(os.path.join(directory, "broker-*/")))
    kept = verdicts.read_quarantines(log_dirs, TOPIC)
    return verdicts.judge(read_history(os.path.join(directory, HISTORY)), TOPIC, kept)


async def _run(
    args: argparse.Namespace, schedule: list[Fault], directory: str
) -> list[verdicts.Verdict]:
    from epochlog.chaos.workload import TOPIC, Workload

    # SIGTERM ends the run as Ctrl-C does: cancelled, so every finally below runs.
    main = asyncio.current_task()
    assert main is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, main.cancel)
    network = Network(args.brokers)
    zookeeper: ZooKeeper | None = None
    brokers: Brokers | None = None
    nemesis: Nemesis | None = None
    faults: asyncio.Future[None] | None = None
    try:
        network.create()
        print(f"network: 10.231.{network.subnet}.0/24, degraded links by {network.degrade_mode}")
        metastore = "sqlite://" + os.path.join(os.path.abspath(directory), "metastore.db")
        if args.metastore == "zk":
            zookeeper = ZooKeeper(os.path.join(directory, "zookeeper"), network.host_address)
            zookeeper.start()
            metastore = zookeeper.uri
        brokers = Brokers(network, directory, metastore, BROKER_SETTINGS)
        for i in range(args.brokers):
            brokers.start(i)
        workload = Workload(
            brokers.bootstrap, args.partitions, args.rate, os.path.join(directory, "producer.log")
        )
        try:
            await _create_topic(workload, args.brokers)

            def log(line: str) -> None:
                seconds = time.monotonic() - started
                workload.note(seconds, line)
                print(f"  [{seconds:6.1f}s] {line}", flush=True)

            nemesis = Nemesis(network, brokers, zookeeper, log)
            started = time.monotonic()
            faults = asyncio.ensure_future(asyncio.to_thread(nemesis.run, schedule, started))
            end = started + args.duration
            await workload.run(lambda: faults.done() and time.monotonic() >= end)
            await faults  # a nemesis that failed fails the run here
            nemesis.heal()
            print(await workload.settle(), flush=True)
            await workload.read_back()
        finally:
            if nemesis is not None and faults is not None:
                nemesis.stop.set()
                await asyncio.wait([faults])  # its step done: nothing starts after teardown
            await workload.close()
            _write_history(workload, schedule, directory)
        kept = verdicts.read_quarantines([brokers.log_dir(i) for i in range(args.brokers)], TOPIC)
        return verdicts.judge(workload.history, TOPIC, kept)
    finally:
        if brokers is not None:
            brokers.stop_all()
        if zookeeper is not None:
            zookeeper.kill()
        network.teardown()


async def _create_topic(workload: Workload, brokers: int) -> None:
    """Create the topic once every broker has registered and there is a controller
    (until then a replication factor of 3 is refused)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            info = await workload.admin.describe_cluster([])
            if len(info.brokers) >= brokers and info.controller_id >= 0:
                break
        except (ClientError, KafkaError, OSError):
            pass
        await asyncio.sleep(0.5)
    await workload.create_topic()


def _write_history(workload: Workload, schedule: list[Fault], directory: str) -> None:
    """One event a line as Python literals (``read_history`` reads it back), after the
    fault schedule as comments."""
    with open(os.path.join(directory, HISTORY), "w") as out:
        for fault in schedule:
            out.write(f"# fault {fault}\n")
        for event in workload.history:
            out.write(f"{event!r}\n")


def read_history(path: str) -> list[checkers.Event]:
    with open(path) as source:
        return [ast.literal_eval(line) for line in source if not line.startswith("#")]
