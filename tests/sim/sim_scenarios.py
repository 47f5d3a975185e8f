"""Scenarios run on the simulated seams, and the trace that says what happened (kept
small: acknowledgements with their virtual times, and every record read back)."""

from __future__ import annotations

import hashlib
import sys
import tempfile

from epochlog.client.admin import AsyncAdmin
from epochlog.client.consumer import AsyncConsumer
from epochlog.client.producer import AsyncProducer
from epochlog.seams.real import OsDisk
from epochlog.sim.cluster import SimCluster
from epochlog.sim.loop import SimClock, run_simulated

Trace = list[tuple[object, ...]]


async def produce_and_read_back(clock: SimClock, seed: int, records: int = 2000) -> Trace:
    """3 brokers, a topic of 3 partitions with replication 3, acks=all records sent in
    bursts, then read back from the beginning."""
    trace: Trace = []
    with tempfile.TemporaryDirectory() as data_dir:
        cluster = SimCluster(clock, OsDisk(), data_dir, seed=seed)
        await cluster.start()
        seams = cluster.seams("client", seed)
        config = {"bootstrap.servers": cluster.bootstrap}
        admin = AsyncAdmin(config, seams)
        producer = AsyncProducer({**config, "linger.ms": 2}, seams)
        consumer = AsyncConsumer({**config, "auto.offset.reset": "earliest"}, seams)
        try:
            await admin.create_topic("t", partitions=3, replication_factor=3)
            for i in range(records):
                sent = await producer.send("t", b"v%d" % i, key=b"k%d" % i)
                sent.add_done_callback(
                    lambda f, i=i: trace.append(
                        ("ack", i, f.result().partition, f.result().offset, clock.monotonic())
                    )
                )
                if i % 100 == 99:
                    await clock.sleep(0.003)
            assert await producer.flush(30)
            consumer.assign([("t", p) for p in range(3)])
            while sum(1 for t in trace if t[0] == "read") < records:
                for r in await consumer.poll(1.0):
                    trace.append(
                        ("read", r.partition, r.offset, r.leader_epoch, r.timestamp, r.value)
                    )
            trace.append(("end", clock.monotonic()))
        finally:
            await consumer.close()
            await producer.close()
            await admin.close()
            await cluster.stop()
    return trace


def digest(trace: Trace) -> str:
    return hashlib.sha256(repr(trace).encode()).hexdigest()


if __name__ == "__main__":
    seed = int(sys.argv[1])
    print(digest(run_simulated(lambda clock: produce_and_read_back(clock, seed))))


async def isolated_leader(clock: SimClock, seed: int, records: int = 12000) -> Trace:
    """acks=all records to one partition (replication 3, min.insync.replicas 2), one
    every 5 ms, while its leader is cut from the network and the metastore for 40 s, then
    healed: the acknowledgements and everything read back afterwards."""
    trace: Trace = []
    with tempfile.TemporaryDirectory() as data_dir:
        cluster = SimCluster(clock, OsDisk(), data_dir, seed=seed)
        await cluster.start()
        seams = cluster.seams("client", seed)
        config = {"bootstrap.servers": cluster.bootstrap}
        admin = AsyncAdmin(config, seams)
        producer = AsyncProducer({**config, "linger.ms": 1, "delivery.timeout.ms": 300_000}, seams)
        consumer = AsyncConsumer({**config, "auto.offset.reset": "earliest"}, seams)
        try:
            await admin.create_topic(
                "t", partitions=1, replication_factor=3, configs={"min.insync.replicas": "2"}
            )
            sent = []
            for i in range(records):
                future = await producer.send("t", b"v%d" % i, partition=0)
                future.add_done_callback(
                    lambda f, i=i: trace.append(
                        ("ack", i, f.result().offset)
                        if f.exception() is None
                        else ("failed", i, type(f.exception()).__name__)
                    )
                )
                sent.append(future)
                await clock.sleep(0.005)
                if i == records // 5:
                    info = await admin.describe_cluster(["t"])
                    leader = info.topics["t"].partitions[0].leader
                    trace.append(("isolate", leader, clock.monotonic()))
                    cluster.isolate(leader)
                if i == records // 5 + 8000:  # 40 s later (records must exceed this)
                    cluster.heal()
                    trace.append(("healed", clock.monotonic()))
            await producer.flush(300)
            consumer.assign([("t", 0)])
            end = max((t[2] for t in trace if t[0] == "ack"), default=-1)
            position = -1
            while position < end:
                for r in await consumer.poll(1.0):
                    trace.append(("read", r.offset, r.leader_epoch, r.value))
                    position = r.offset
        finally:
            await consumer.close()
            await producer.close()
            await admin.close()
            await cluster.stop()
    return trace
