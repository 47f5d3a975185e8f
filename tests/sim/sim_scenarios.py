"""Scenarios run on the simulated seams, and the trace that says what happened (kept
small: acknowledgements, with their virtual times where timing is the point, and every
record read back)."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import random
import sys
from collections.abc import AsyncIterator

from epochlog.client.admin import AsyncAdmin
from epochlog.client.consumer import AsyncConsumer
from epochlog.client.producer import AsyncProducer
from epochlog.sim.cluster import SimCluster
from epochlog.sim.loop import SimClock, run_simulated

Trace = list[tuple[object, ...]]


@contextlib.asynccontextmanager
async def cluster_and_clients(
    clock: SimClock, seed: int, settings: dict[str, object] | None = None, **producer: object
) -> AsyncIterator[tuple[SimCluster, AsyncAdmin, AsyncProducer, AsyncConsumer]]:
    """3 simulated brokers (with broker ``settings``), and an admin, a producer and a
    consumer on a client host."""
    cluster = SimCluster(clock, seed=seed, settings=settings)
    await cluster.start()
    seams = cluster.seams("client", seed)
    config = {"bootstrap.servers": cluster.bootstrap}
    admin = AsyncAdmin(config, seams)
    sender = AsyncProducer({**config, **producer}, seams)
    consumer = AsyncConsumer({**config, "auto.offset.reset": "earliest"}, seams)
    try:
        yield cluster, admin, sender, consumer
    finally:
        await consumer.close()
        await sender.close()
        await admin.close()
        await cluster.stop()


async def produce_and_read_back(clock: SimClock, seed: int, records: int = 2000) -> Trace:
    """A topic of 3 partitions with replication 3, acks=all records sent in bursts, then
    read back from the beginning."""
    trace: Trace = []
    async with cluster_and_clients(clock, seed, **{"linger.ms": 2}) as (_, admin, sender, reader):
        await admin.create_topic("t", partitions=3, replication_factor=3)
        for i in range(records):
            sent = await sender.send("t", b"v%d" % i, key=b"k%d" % i)
            sent.add_done_callback(
                lambda f, i=i: trace.append(
                    ("ack", i, f.result().partition, f.result().offset, clock.monotonic())
                )
            )
            if i % 100 == 99:
                await clock.sleep(0.003)
        assert await sender.flush(30)
        reader.assign([("t", p) for p in range(3)])
        while sum(1 for t in trace if t[0] == "read") < records:
            for r in await reader.poll(1000):
                trace.append(("read", r.partition, r.offset, r.leader_epoch, r.timestamp, r.value))
        trace.append(("end", clock.monotonic()))
    return trace


async def isolated_leader(clock: SimClock, seed: int, records: int = 12000) -> Trace:
    """acks=all records to one partition (replication 3, min.insync.replicas 2), one
    every 5 ms, while its leader is cut from the network and the metastore for 40 s, then
    healed: the acknowledgements and everything read back afterwards."""
    isolate_at, heal_at = records // 5, records // 5 + 8000
    assert heal_at < records
    trace: Trace = []
    producer = {"linger.ms": 1, "delivery.timeout.ms": 300_000}
    async with cluster_and_clients(clock, seed, **producer) as (cluster, admin, sender, reader):
        await admin.create_topic(
            "t", partitions=1, replication_factor=3, configs={"min.insync.replicas": "2"}
        )
        for i in range(records):
            sent = await sender.send("t", b"v%d" % i, partition=0)
            sent.add_done_callback(
                lambda f, i=i: trace.append(
                    ("ack", i, f.result().offset)
                    if f.exception() is None
                    else ("failed", i, type(f.exception()).__name__)
                )
            )
            await clock.sleep(0.005)
            if i == isolate_at:
                leader = (await admin.describe_cluster(["t"])).topics["t"].partitions[0].leader
                trace.append(("isolate", leader, clock.monotonic()))
                cluster.isolate(leader)
            if i == heal_at:
                cluster.heal()
                trace.append(("healed", clock.monotonic()))
        await sender.flush(300)
        reader.assign([("t", 0)])
        end = max((t[2] for t in trace if t[0] == "ack"), default=-1)
        position = -1
        while position < end:
            for r in await reader.poll(1000):
                trace.append(("read", r.offset, r.leader_epoch, r.value))
                position = r.offset
    return trace


async def crashing_brokers(
    clock: SimClock, seed: int, records: int = 8000, crashes: int = 4
) -> Trace:
    """acks=all records to 3 partitions (replication 3, min.insync.replicas 2), one every
    5 ms, while one broker at a time is killed (its disk keeps only what was fsynced,
    the last unsynced write maybe torn) and restarted 3 s later (it registers once its
    previous session, of 4 s, has expired); then everything read back. The victims come
    from the seed."""
    trace: Trace = []
    rng = random.Random(seed)
    every = records // (crashes + 1)
    producer = {"linger.ms": 1, "delivery.timeout.ms": 300_000}
    settings = {"zookeeper.session.timeout.ms": 4000}
    async with cluster_and_clients(clock, seed, settings, **producer) as (
        cluster,
        admin,
        sender,
        reader,
    ):
        await admin.create_topic(
            "t", partitions=3, replication_factor=3, configs={"min.insync.replicas": "2"}
        )
        # A restarted broker waits for its previous session to expire before it
        # registers: the restart runs beside the producer, one broker down at a time.
        down: tuple[int, float] | None = None
        restarting: asyncio.Task[None] | None = None
        for i in range(records):
            sent = await sender.send("t", b"v%d" % i, key=b"k%d" % i)
            sent.add_done_callback(
                lambda f, i=i: trace.append(
                    ("ack", i, f.result().partition, f.result().offset)
                    if f.exception() is None
                    else ("failed", i, type(f.exception()).__name__)
                )
            )
            await clock.sleep(0.005)
            if down is not None and clock.monotonic() >= down[1]:
                restarting = asyncio.ensure_future(cluster.start_broker(down[0]))
                trace.append(("restarting", down[0], clock.monotonic()))
                down = None
            idle = down is None and (restarting is None or restarting.done())
            if i % every == every - 1 and idle:
                victim = rng.randrange(len(cluster.brokers))
                kept = cluster.crash_broker(victim)
                trace.append(("crashed", victim, kept, clock.monotonic()))
                down = (victim, clock.monotonic() + 3)
        if down is not None:
            restarting = asyncio.ensure_future(cluster.start_broker(down[0]))
        if restarting is not None:
            await restarting
        await sender.flush(300)
        reader.assign([("t", p) for p in range(3)])
        ends = {p: -1 for p in range(3)}
        for t in trace:
            if t[0] == "ack":
                ends[t[2]] = max(ends[t[2]], t[3])
        positions = {p: -1 for p in range(3)}
        # Bounded: a lost record would otherwise be waited for for ever (in virtual time).
        give_up = clock.monotonic() + 120
        while any(positions[p] < ends[p] for p in ends) and clock.monotonic() < give_up:
            for r in await reader.poll(1000):
                trace.append(("read", r.partition, r.offset, r.value))
                positions[r.partition] = r.offset
    return trace


def digest(trace: Trace) -> str:
    return hashlib.sha256(repr(trace).encode()).hexdigest()


if __name__ == "__main__":
    seed = int(sys.argv[1])
    print(digest(run_simulated(lambda clock: produce_and_read_back(clock, seed))))
