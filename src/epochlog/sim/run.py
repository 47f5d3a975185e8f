"""One simulated run from a seed: a cluster, a workload, a fault schedule, the checkers.

The workload is an acks=all producer of keyed records at a steady rate and a consumer
of every partition (``auto.offset.reset`` none: it reports truncations, and goes on
from the divergence offset); the faults come from ``faults.draw_schedule``. After the
schedule every broker is back, the producer is flushed and the whole log is read once
more (the "final" read), and ``checkers.check`` judges the history; what the brokers removed
from their segments is then checked against their quarantines on the simulated disk.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
from dataclasses import dataclass, field

from epochlog.client.admin import AsyncAdmin
from epochlog.client.consumer import AsyncConsumer
from epochlog.client.producer import AsyncProducer
from epochlog.metastore.memory import memory_store
from epochlog.sim import checkers, groups, isr
from epochlog.sim.cluster import DATA_DIR, SimCluster
from epochlog.sim.disk import SimDisk
from epochlog.sim.faults import FAULT_KINDS, Fault, draw_schedule, inject
from epochlog.sim.loop import SimClock, SimulationStalled, run_simulated
from epochlog.sim.recording import (
    LIST_OFFSETS_S,
    ask_list_offsets,
    client_epochs,
    poll_into,
    read_back,
    record_ack,
)

TOPIC = "t"


@dataclass(frozen=True)
class SimOptions:
    brokers: int = 3
    partitions: int = 3
    duration: float = 30.0  # simulated seconds of workload and faults
    rate: int = 200  # records per simulated second
    faults: tuple[str, ...] = FAULT_KINDS
    workload: tuple[str, ...] = ("produce", "consume")  # "groups" adds sim/groups.py's
    session_timeout_ms: int = 4000
    # How often the cluster is snapshotted for the KIP-320 model's invariants (simulated
    # seconds): a violation that lasts less may go unseen.
    observe_s: float = 0.05


@dataclass
class SimResult:
    seed: int
    schedule: list[Fault]
    history: list[checkers.Event] = field(default_factory=list)
    findings: dict[str, list[str]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not any(self.findings.values())

    @property
    def digest(self) -> str:
        """The history's hash: the same seed gives the same one, byte for byte."""
        return hashlib.sha256(repr(self.history).encode()).hexdigest()[:16]


def run_seed(
    seed: int, options: SimOptions = SimOptions(), schedule: list[Fault] | None = None
) -> SimResult:
    """Run one seed (with its own fault schedule, or ``schedule``) and check it."""
    if schedule is None:
        schedule = draw_schedule(
            random.Random(seed), options.faults, options.brokers, options.duration
        )
    result = SimResult(seed, schedule)
    disks: list[SimDisk] = []
    stalled = []
    try:
        run_simulated(lambda clock: _run(clock, seed, options, schedule, result.history, disks))
    except SimulationStalled as exc:
        # A liveness bug (everything waits, or something spins): judged as far as it got.
        stalled.append(str(exc))
    result.findings = checkers.check(result.history)
    result.findings["quarantine-complete"] = _quarantine_complete(disks[0])
    result.findings["stalled"] = stalled
    return result


def _quarantine_complete(disk: SimDisk) -> list[str]:
    quarantined: dict[str, list[bytes]] = {}
    for path, data in disk.files_under(DATA_DIR):
        folder, name = path.rsplit("/quarantine/", 1) if "/quarantine/" in path else ("", "")
        if name.endswith(".log"):
            quarantined.setdefault(folder, []).append(data)
    return checkers.quarantine_complete(disk.removed, quarantined)


async def _run(
    clock: SimClock,
    seed: int,
    options: SimOptions,
    schedule: list[Fault],
    history: list[checkers.Event],
    disks: list[SimDisk],
) -> None:
    settings = {
        "zookeeper.session.timeout.ms": options.session_timeout_ms,
        "default.replication.factor": min(3, options.brokers),
        "min.insync.replicas": min(2, options.brokers),
    }
    cluster = SimCluster(clock, seed=seed, brokers=options.brokers, settings=settings)
    disks.append(cluster.disk)
    await cluster.start()
    seams = cluster.seams("client", seed)
    config = {"bootstrap.servers": cluster.bootstrap}
    admin = AsyncAdmin(config, seams)
    producer = AsyncProducer({**config, "linger.ms": 2, "delivery.timeout.ms": 300_000}, seams)
    consumer = AsyncConsumer({**config, "auto.offset.reset": "none"}, seams)
    closing: list[AsyncConsumer] = []
    try:
        await admin.create_topic(
            TOPIC, partitions=options.partitions, replication_factor=min(3, options.brokers)
        )
        partitions = [(TOPIC, p) for p in range(options.partitions)]
        consumer.assign(partitions)
        for tp in partitions:
            consumer.seek(tp, 0)
        faults = asyncio.ensure_future(inject(clock, cluster, schedule, history.append))
        watchers = [
            asyncio.ensure_future(
                _observe(
                    clock,
                    cluster,
                    {"producer": producer, "consumer": consumer, "admin": admin},
                    options.observe_s,
                    history,
                )
            ),
            asyncio.ensure_future(ask_list_offsets(clock, admin, partitions, history)),
        ]
        if "groups" in options.workload:
            member = AsyncConsumer(
                {**config, "group.id": groups.GROUP, "auto.offset.reset": "earliest"}, seams
            )
            closing.append(member)
            watchers.append(asyncio.ensure_future(groups.member(member, TOPIC, history)))
            watchers.append(
                asyncio.ensure_future(groups.watch(clock, admin, LIST_OFFSETS_S, history))
            )
        start = clock.monotonic()
        sent = 0
        while clock.monotonic() - start < options.duration or not faults.done():
            due = int((clock.monotonic() - start) * options.rate)
            for i in range(sent, max(sent, due)):
                future = await producer.send(TOPIC, checkers.value_of(i), key=b"k%d" % i)
                future.add_done_callback(lambda f, i=i: record_ack(history, i, f))
            sent = max(sent, due)
            await poll_into(consumer, history, 10)
        await faults
        await producer.flush(300)
        await read_back(clock, consumer, admin, partitions, history)
        for watcher in watchers:
            watcher.cancel()
        await asyncio.gather(*watchers, return_exceptions=True)
    finally:
        for member in closing:
            await member.close()
        await consumer.close()
        await producer.close()
        await admin.close()
        await cluster.stop()


async def _observe(
    clock: SimClock,
    cluster: SimCluster,
    clients: dict[str, AsyncProducer | AsyncConsumer | AsyncAdmin],
    every_s: float,
    history: list[checkers.Event],
) -> None:
    """Judge the KIP-320 model's invariants on a snapshot between steps (each violation
    goes into the history once), and record each change of a leader epoch the clients
    hold (KIP-232)."""
    seen: set[str] = set()
    held: dict[tuple[str, str], int] = {}

    def report(name: str, problem: str) -> None:
        if problem not in seen:
            seen.add(problem)
            history.append(("violated", name, problem, round(clock.monotonic(), 3)))

    store = memory_store(cluster.metastore.removeprefix("memory://"))
    watch = isr.IsrWriteWatch(store, lambda problem: report("OfflineNeverJoinsIsr", problem))
    store.write_observers.append(watch)
    try:
        while True:
            await clock.sleep(every_s)
            for key, epoch in client_epochs(clients):
                if held.get(key) != epoch:
                    held[key] = epoch
                    history.append(("client-epoch", *key, epoch))
            views = isr.snapshot(cluster)
            for name, judge in isr.SNAPSHOT_CHECKERS.items():
                for problem in judge(views):
                    report(name, problem)
    finally:
        store.write_observers.remove(watch)
