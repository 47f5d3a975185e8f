"""How fast the simulator runs: simulated seconds per wall second (the reference is the
wall clock of the same run), for 3 brokers and a topic of 30 partitions with
replication 3, under a steady workload: a producer sending acks=all records at --rate
per simulated second, a consumer of all 30 partitions reading them. Medians of --runs.

    python bench/sim.py [--runs 3] [--seconds 60] [--rate 500]
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import median  # noqa: E402

from epochlog.client.admin import AsyncAdmin
from epochlog.client.consumer import AsyncConsumer
from epochlog.client.producer import AsyncProducer
from epochlog.sim.cluster import SimCluster
from epochlog.sim.loop import SimClock, run_simulated

PARTITIONS = 30


async def steady(clock: SimClock, seconds: float, rate: int) -> tuple[int, int]:
    """(records acknowledged, records read) after ``seconds`` of simulated time."""
    cluster = SimCluster(clock, seed=1)
    await cluster.start()
    seams = cluster.seams("client", 1)
    config = {"bootstrap.servers": cluster.bootstrap}
    admin = AsyncAdmin(config, seams)
    producer = AsyncProducer({**config, "linger.ms": 5}, seams)
    consumer = AsyncConsumer({**config, "auto.offset.reset": "earliest"}, seams)
    try:
        await admin.create_topic("t", partitions=PARTITIONS, replication_factor=3)
        consumer.assign([("t", p) for p in range(PARTITIONS)])
        start, sent, read = clock.monotonic(), 0, 0
        while clock.monotonic() - start < seconds:
            # Every 10 ms, as many records as the rate owes by then (rates under 100 a
            # second too).
            due = int((clock.monotonic() - start) * rate) + 1
            while sent < due:
                await producer.send("t", b"x" * 100, key=b"k%d" % sent)
                sent += 1
            await clock.sleep(0.01)
            read += len(await consumer.poll(0))
        await producer.flush(30)
        while read < sent:
            read += len(await consumer.poll(1000))
        return sent, read
    finally:
        await consumer.close()
        await producer.close()
        await admin.close()
        await cluster.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--rate", type=int, default=500)
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    ratios = []
    for run in range(args.runs):
        wall = time.perf_counter()
        sent, read = run_simulated(lambda clock: steady(clock, args.seconds, args.rate))
        wall = time.perf_counter() - wall
        ratios.append(args.seconds / wall)
        print(
            f"run {run + 1}: {args.seconds:.0f} simulated s in {wall:.1f} wall s "
            f"({sent} records sent, {read} read): {ratios[-1]:.1f}x real time"
        )
    print(f"median: {median(ratios):.1f} simulated seconds per wall second")


if __name__ == "__main__":
    main()
