"""Replication costs on a local 3-broker cluster (the replication figures of bench/RESULTS.md).

1. Produce throughput with replication factor 3 and acks=all, as a ratio to replication
   factor 1 measured in the same run (confluent-kafka, 100-byte records).
2. Failover time: from SIGKILL of a partition's leader to the first acks=all write
   acknowledged by the new leader, over many trials; p50 and p99, with the session
   timeout the brokers used, which is `epochlog up`'s (a SIGKILLed broker's session
   ends at the next metastore change poll; the timeout bounds only a hung one).

    python bench/cluster.py [--records 200000] [--runs 3] [--trials 20]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import confluent_kafka as ck
from common import median

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "cluster"))
from cluster_harness import Cluster  # noqa: E402

from epochlog.settings.broker import BROKER  # noqa: E402
from epochlog.tools.local_cluster import UP_SESSION_TIMEOUT_MS  # noqa: E402


def produce_rate(bootstrap: str, topic: str, count: int, acks: str) -> float:
    producer = ck.Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": acks,
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    value = b"x" * 100
    errors: list[object] = []
    start = time.perf_counter()
    for i in range(count):
        while True:
            try:
                producer.produce(
                    topic, value, key=b"%d" % i, on_delivery=lambda e, m: e and errors.append(e)
                )
                break
            except BufferError:
                producer.poll(0.005)
    left = producer.flush(120)
    elapsed = time.perf_counter() - start
    if left or errors:
        raise RuntimeError(f"{left} undelivered, errors: {errors[:3]}")
    return count / elapsed


def first_ack_after_kill(cluster: Cluster, topic: str) -> float:
    """Seconds from SIGKILL of the leader to the first acks=all write acknowledged."""
    leader, epoch = cluster.leader(topic)
    producer = ck.Producer(
        {
            "bootstrap.servers": cluster.live_bootstrap(),
            "acks": "all",
            "linger.ms": 0,
            "message.timeout.ms": 60000,
            "retry.backoff.ms": 20,
            "retry.backoff.max.ms": 100,
            "topic.metadata.refresh.interval.ms": 100,
        }
    )
    producer.produce(topic, b"warm-up")
    assert producer.flush(30) == 0
    killed_at = time.monotonic()
    cluster.brokers[leader].kill()
    acked: list[float] = []
    while not acked:
        producer.produce(
            topic,
            b"probe",
            on_delivery=lambda e, m: None if e else acked.append(time.monotonic()),
        )
        producer.flush(0.05)
        if time.monotonic() - killed_at > 120:
            raise RuntimeError("no acknowledged write within 120 s of the kill")
    producer.flush(30)
    new_leader, new_epoch = cluster.leader(topic)
    assert new_epoch > epoch, (new_leader, new_epoch, epoch)
    cluster.brokers[leader].restart()
    deadline = time.monotonic() + 60
    while len(cluster.metadata(topic)["partitions"][0].isr) < 3:
        if time.monotonic() > deadline:
            raise RuntimeError("the restarted broker did not re-join the ISR")
        time.sleep(0.1)
    return acked[0] - killed_at


def up_settings() -> dict[str, str]:
    """What `epochlog up` runs with: its session timeout, and Kafka's defaults where the
    test harness shortens timeouts."""
    settings = {"zookeeper.session.timeout.ms": str(UP_SESSION_TIMEOUT_MS)}
    for name in ("replica.lag.time.max.ms", "replica.fetch.wait.max.ms"):
        settings[name] = str(BROKER.default(name))
    return settings


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--trials", type=int, default=20)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="epochlog-bench-cluster-") as base:
        cluster = Cluster(Path(base), f"sqlite://{base}/metastore.db", 3, up_settings())
        session_timeout_ms = cluster.brokers[0].settings["zookeeper.session.timeout.ms"]
        try:
            cluster.start()
            rf1, rf3 = [], []
            for run in range(args.runs):
                cluster.create_topic(f"rf1-{run}", partitions=1, replication=1)
                cluster.create_topic(
                    f"rf3-{run}", partitions=1, replication=3, min_insync_replicas="2"
                )
                rf1.append(produce_rate(cluster.bootstrap, f"rf1-{run}", args.records, "all"))
                rf3.append(produce_rate(cluster.bootstrap, f"rf3-{run}", args.records, "all"))
                print(f"run {run}: rf1 {rf1[-1]:,.0f} rec/s, rf3 {rf3[-1]:,.0f} rec/s", flush=True)
            ratios = [b / a for a, b in zip(rf1, rf3, strict=True)]
            print(
                f"produce 100 B acks=all, median of {args.runs}: RF1 {median(rf1):,.0f} rec/s,"
                f" RF3 {median(rf3):,.0f} rec/s; RF3/RF1 per run median {median(ratios):.2f}"
                f" (min {min(ratios):.2f}, max {max(ratios):.2f}; target >= 0.9)"
            )
            cluster.create_topic("failover", partitions=1, replication=3, min_insync_replicas="2")
            times = []
            for trial in range(args.trials):
                times.append(first_ack_after_kill(cluster, "failover"))
                print(f"trial {trial}: {times[-1] * 1000:.0f} ms", flush=True)
            print(
                f"failover SIGKILL -> first acks=all ack, {args.trials} trials:"
                f" p50 {percentile(times, 0.5) * 1000:.0f} ms,"
                f" p99 {percentile(times, 0.99) * 1000:.0f} ms"
                f" (zookeeper.session.timeout.ms={session_timeout_ms}, SQLite metastore)"
            )
        finally:
            cluster.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
