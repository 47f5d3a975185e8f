"""Many clients on one broker: producer and consumer processes (confluent-kafka) on one
topic of many partitions, against one epochlog broker and against librdkafka's mock
cluster doing the same in the same run.

Each phase starts every client process at once (they connect and learn the metadata
first) and is timed from the first client's start to the last client's end: produce,
each producer writing its share of the records round-robin over all partitions (acks=all,
idempotent); then consume, each consumer assigned its share of the partitions and
reading the end of each partition ``--passes`` times over. The mock keeps only the last
few MB of each partition: both are read over as many records of each partition as the
mock kept.
Ratios are epochlog's rate to the mock's, medians of --runs.

    python bench/many_clients.py [--runs 3] [--producers 8] [--consumers 8] [--partitions 24]
                                 [--passes 10]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
import tempfile
import time
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import BrokerProcess, MockCluster, fmt_rate, median  # noqa: E402
from produce_consume import CONSUMER_CONF, PRODUCER_CONF  # noqa: E402

# A hang guard for one phase; never a judgement on speed.
PHASE_LIMIT_S = 600.0


def produce_share(
    bootstrap: str, topic: str, partitions: int, count: int, size: int, go: Event, out: Any
) -> None:
    producer = ck.Producer({"bootstrap.servers": bootstrap, **PRODUCER_CONF})
    producer.list_topics(topic, timeout=30)
    value = os.urandom(size)
    errors = 0

    def on_delivery(err: ck.KafkaError | None, _msg: ck.Message) -> None:
        nonlocal errors
        errors += err is not None

    go.wait()
    start = time.time()
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value, partition=i % partitions, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.001)
    left = producer.flush(PHASE_LIMIT_S)
    out.put((start, time.time(), count if not (left or errors) else -1, count * size))


def consume_share(
    bootstrap: str, topic: str, window: dict[int, int], passes: int, go: Event, out: Any
) -> None:
    """Read the last ``window[p]`` records of each partition p given, ``passes`` times.
    Each ``consume`` asks for no more records than are left: asked for more, librdkafka
    waits out the whole timeout for them at the end of a pass."""
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, **CONSUMER_CONF})
    ends, starts = {}, []
    for p, count in window.items():
        low, high = consumer.get_watermark_offsets(ck.TopicPartition(topic, p), timeout=30)
        if high > low and count > 0:
            ends[p] = high
            starts.append(ck.TopicPartition(topic, p, max(low, high - count)))
    per_pass = sum(e - s.offset for e, s in zip(ends.values(), starts, strict=True))
    go.wait()
    start = time.time()
    got = nbytes = 0
    deadline = start + PHASE_LIMIT_S
    for _ in range(passes):
        consumer.assign(starts)
        left = per_pass
        while left and time.time() < deadline:
            for m in consumer.consume(min(1000, left), 0.2):
                if m.error() is not None or m.offset() >= ends[m.partition()]:
                    continue
                left -= 1
                nbytes += len(m.value() or b"")
        got += per_pass - left
        if left:
            break
    consumer.close()
    out.put((start, time.time(), got if got == per_pass * passes else -1, nbytes))


def phase(target: Any, args: list[tuple[Any, ...]]) -> tuple[float, int]:
    """(seconds from the first start to the last end, records) of processes run at once."""
    ctx = mp.get_context("spawn")
    go, out = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=target, args=(*a, go, out)) for a in args]
    for p in procs:
        p.start()
    time.sleep(2.0)  # each has connected and read its metadata (or soon will)
    go.set()
    results = [out.get(timeout=PHASE_LIMIT_S) for _ in procs]
    for p in procs:
        p.join(30)
    if any(r[2] < 0 for r in results):
        raise RuntimeError(f"a client did not finish: {results}")
    return max(r[1] for r in results) - min(r[0] for r in results), sum(r[2] for r in results)


def retained(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    """Records each partition holds now (the mock keeps only its last few MB)."""
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, **CONSUMER_CONF})
    try:
        marks = [
            consumer.get_watermark_offsets(ck.TopicPartition(topic, p), timeout=30)
            for p in range(partitions)
        ]
    finally:
        consumer.close()
    return {p: high - low for p, (low, high) in enumerate(marks)}


def run_once(
    bootstrap: str,
    topic: str,
    args: argparse.Namespace,
    size: int,
    count: int,
    window: dict[int, int] | None = None,
) -> tuple[dict[str, float], dict[int, int]]:
    """Rates of both phases, and the records each partition held for the consumers,
    who read the last ``window[p]`` of partition p (all of it without a window)."""
    share = count // args.producers
    produce_s, produced = phase(
        produce_share,
        [(bootstrap, topic, args.partitions, share, size) for _ in range(args.producers)],
    )
    held = retained(bootstrap, topic, args.partitions)
    read = {p: min(n, (window or held).get(p, n)) for p, n in held.items()}
    groups = [range(c, args.partitions, args.consumers) for c in range(args.consumers)]
    consume_s, consumed = phase(
        consume_share,
        [(bootstrap, topic, {p: read[p] for p in g}, args.passes) for g in groups],
    )
    return {"produce": produced / produce_s, "consume": consumed / consume_s}, read


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(60)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--producers", type=int, default=8)
    ap.add_argument("--consumers", type=int, default=8)
    ap.add_argument("--partitions", type=int, default=24)
    ap.add_argument("--records-100", type=int, default=800_000, help="records of 100 bytes")
    ap.add_argument("--records-1k", type=int, default=200_000, help="records of 1 KiB")
    ap.add_argument("--passes", type=int, default=10, help="reads of what the mock kept")
    args = ap.parse_args(argv)
    rates: dict[tuple[str, int, str], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="epochlog-bench-many-") as tmp:
        broker = BrokerProcess(Path(tmp) / "logs", Path(tmp), {}).start()
        # The mock cluster runs on this process's librdkafka threads; the client
        # processes reach it over its port, as they reach the broker.
        mock = MockCluster()
        try:
            # Unmeasured: each target's first large batches load what the broker loads
            # lazily (the compiled record walker), and the clients' first connections.
            for name, bootstrap in (("mock", mock.bootstrap), ("epochlog", broker.bootstrap)):
                if name == "mock":
                    mock.create_topic("warm-up", args.partitions)
                else:
                    create_topic(bootstrap, "warm-up", args.partitions)
                run_once(bootstrap, "warm-up", args, 100, 8 * args.producers * 1000)
            for run in range(args.runs):
                for size, count in ((100, args.records_100), (1024, args.records_1k)):
                    topic = f"many-{size}-{run}"
                    # The mock first: the broker's consumers read as many records of
                    # each partition as the mock kept.
                    mock.create_topic(topic, args.partitions)
                    found, window = run_once(mock.bootstrap, topic, args, size, count)
                    create_topic(broker.bootstrap, topic, args.partitions)
                    ours, _ = run_once(broker.bootstrap, topic, args, size, count, window)
                    for name, got in (("mock", found), ("epochlog", ours)):
                        for op, rate in got.items():
                            rates.setdefault((name, size, op), []).append(rate)
                print(f"run {run + 1} of {args.runs} done", flush=True)
            broker.stop()
        finally:
            broker.close()
    print(
        f"\n{args.producers} producers and {args.consumers} consumers (processes), "
        f"{args.partitions} partitions, medians of {args.runs} runs (min, max of the ratio):"
    )
    for size in (100, 1024):
        for op in ("produce", "consume"):
            ours, theirs = rates[("epochlog", size, op)], rates[("mock", size, op)]
            ratios = [o / m for o, m in zip(ours, theirs, strict=True)]
            print(
                f"  {op:8} {size:>5} B  epochlog {fmt_rate(median(ours), median(ours) * size)}"
                f"  mock {fmt_rate(median(theirs), median(theirs) * size)}"
                f"  {median(ratios):.2f} of mock ({min(ratios):.2f}, {max(ratios):.2f})"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
