"""Fault schedules: which broker fails how, when and for how long, drawn from a seed,
and how each is done to a simulated cluster.

A schedule is plain data, printed with a failing seed and replayed exactly; a shorter
one (fewer faults, shorter ones) is what a failing run is shrunk to. What a fault
chooses as it happens (how far a clock jumps, which bytes rot) comes from its own
``salt``, so a fault does the same thing whatever else the schedule holds.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from epochlog.client.errors import ClientError, TopicPartition
from epochlog.protocol.errors import KafkaError

if TYPE_CHECKING:  # the command line reads FAULT_KINDS without loading a cluster
    from epochlog.sim.cluster import SimCluster
    from epochlog.sim.loop import SimClock

# kill: SIGKILL on a machine that loses its page cache (sim/disk.py), restarted later;
# partition: cut from the network and the metastore, a zombie until healed;
# split: cut from the other brokers and the metastore only (clients still reach it);
# metastore: cut from the metastore only (it still fetches from its leaders);
# pause: SIGSTOP then SIGCONT (its session expires meanwhile if the pause is long);
# clock: its wall clock jumps forward and its clock runs fast or slow for a while;
# disk: killed with its unsynced writes torn into garbage, and bytes of its segments
# flipped while it is down (bit rot), then restarted: recovery must cut or repair;
# reassign: a partition it holds moves off it (KIP-455: a spare broker joins, or the
# replication factor drops by one; its replica is retired) and, when the fault ends,
# back onto it (its copy made again from the leader's).
FAULT_KINDS = ("kill", "partition", "split", "metastore", "pause", "clock", "disk", "reassign")

Note = Callable[[tuple[object, ...]], None]


@dataclass(frozen=True)
class Fault:
    at: float  # simulated seconds after the workload starts
    kind: str
    broker: int
    lasts: float  # seconds until the restart, the heal, the resume or the clock's mend
    salt: int = 0  # seeds what the fault chooses as it happens

    def __str__(self) -> str:
        return f"{self.at:7.3f}s {self.kind:<9} b{self.broker} for {self.lasts:.3f}s" + (
            f" (salt {self.salt})" if self.salt else ""
        )


def draw_schedule(
    rng: random.Random, kinds: tuple[str, ...], brokers: int, duration: float
) -> list[Fault]:
    """Faults one after another over ``duration`` seconds (each ends before the next
    begins, though a killed broker may still be waiting to register again), none in
    the last five seconds."""
    faults: list[Fault] = []
    if not kinds:
        return faults
    at = rng.uniform(1.0, 4.0)
    while at < duration - 5:
        lasts = round(rng.uniform(0.5, 6.0), 3)
        kind = rng.choice(kinds)
        broker = rng.randrange(brokers)
        salt = rng.randrange(1, 1 << 31) if kind in ("clock", "disk", "reassign") else 0
        faults.append(Fault(round(at, 3), kind, broker, lasts, salt))
        at += lasts + rng.uniform(1.0, 6.0)
    return faults


async def inject(clock: SimClock, cluster: SimCluster, schedule: list[Fault], note: Note) -> None:
    """Do each fault at its time; then bring every broker back and heal."""
    start = clock.monotonic()
    restarts: list[asyncio.Future[None]] = []
    for fault in schedule:
        await clock.sleep(max(0.0, start + fault.at - clock.monotonic()))
        if cluster.brokers[fault.broker] is None:
            continue  # still down from an earlier fault
        restart = await _do(clock, cluster, fault, note)
        if restart:
            restarts.append(asyncio.ensure_future(cluster.start_broker(fault.broker)))
    await asyncio.gather(*restarts)


async def _do(clock: SimClock, cluster: SimCluster, fault: Fault, note: Note) -> bool:
    """Do ``fault`` and wait out its length; True if its broker is to be restarted."""
    i, salted = fault.broker, random.Random(fault.salt)
    if fault.kind == "reassign":
        await _reassign_away_and_back(clock, cluster, fault, salted, note)
        return False
    if fault.kind in ("kill", "disk"):
        cluster.crash_broker(i, salted if fault.kind == "disk" else None)
        if fault.kind == "disk":
            for path, position in cluster.disk.rot(cluster.data_dir(i), salted):
                note(("rot", path, position))
        await clock.sleep(fault.lasts)
        return True
    if fault.kind == "pause":
        cluster.pause(i)
        await clock.sleep(fault.lasts)
        cluster.resume(i)
    elif fault.kind == "clock":
        host_clock = cluster.clocks[i]
        host_clock.step(salted.randint(1_000, 3_600_000))
        host_clock.drift(salted.choice((0.5, 0.8, 1.25, 2.0)))
        await clock.sleep(fault.lasts)
        host_clock.drift(1.0)
    else:
        cut = {"partition": cluster.isolate, "split": cluster.split}
        cut.get(fault.kind, cluster.cut_metastore)(i)
        await clock.sleep(fault.lasts)
        cluster.heal()
    return False


async def _reassign_away_and_back(
    clock: SimClock, cluster: SimCluster, fault: Fault, salted: random.Random, note: Note
) -> None:
    """Through the admin client, as an operator would: move one partition of the first
    topic that the broker holds off it, and after the fault's length back."""
    from epochlog.client.admin import AsyncAdmin

    admin = AsyncAdmin({"bootstrap.servers": cluster.bootstrap}, cluster.seams("operator", 0))
    try:
        info = await admin.describe_cluster()
        names = sorted(name for name in info.topics if not name.startswith("__"))
        held = [p for p in info.topics[names[0]].partitions if fault.broker in p.replicas]
        if not held:
            await clock.sleep(fault.lasts)
            return
        chosen = held[salted.randrange(len(held))]
        original = list(chosen.replicas)
        spare = [b for b in sorted(info.brokers) if b not in original]
        target = [r for r in original if r != fault.broker] + spare[:1]
        tp = TopicPartition(names[0], chosen.partition)
        answer = await admin.alter_partition_reassignments({tp: target})
        note(("reassign", str(tp), original, target, answer[tp][0].name))
        await clock.sleep(fault.lasts)
        answer = await admin.alter_partition_reassignments({tp: original})
        note(("reassign", str(tp), target, original, answer[tp][0].name))
    except (KafkaError, ClientError, OSError) as exc:
        note(("reassign-failed", repr(exc)))
    finally:
        await admin.close()
