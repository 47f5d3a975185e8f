"""Produce and consume throughput of one epochlog broker with confluent-kafka.

Each figure is printed beside references measured in the same run, on the same
machine: librdkafka's built-in mock cluster (`test.mock.num.brokers=1`) doing the
same workload, and iperf3's loopback TCP bandwidth. Medians of --runs runs.

    python bench/produce_consume.py [--runs 3] [--records-100 300000] [--records-1k 100000]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import BrokerProcess, fmt_rate, iperf3_loopback_bytes_per_s, median  # noqa: E402

# The same client settings for the broker and the mock, so only the server differs.
PRODUCER_CONF: dict[str, object] = {
    "acks": "all",
    "enable.idempotence": True,
    "linger.ms": 5,
    "batch.size": 1_000_000,
    "compression.type": "none",
    "queue.buffering.max.messages": 500_000,
}
CONSUMER_CONF: dict[str, object] = {
    "group.id": "epochlog-bench-unused",
    "enable.auto.commit": False,
    "enable.partition.eof": False,
    # Passes end at the log end: do not long-poll there.
    "fetch.wait.max.ms": 5,
    # librdkafka pauses fetching for fetch.queue.backoff.ms (1 s) whenever its queue is
    # over queued.min.messages; a benchmark that drains fast should not measure pauses.
    "fetch.queue.backoff.ms": 1,
    "queued.min.messages": 1_000_000,
}


@dataclass
class Result:
    produced: int
    produce_s: float
    consumed: int
    consume_s: float
    retained: int

    def rate(self, op: str) -> float:
        """Records per second for "produce" or "consume"."""
        if op == "produce":
            return self.produced / self.produce_s
        return self.consumed / self.consume_s


def produce(producer: ck.Producer, topic: str, count: int, value: bytes) -> float:
    """Seconds from the first produce call to the last delivery report."""
    errors = 0

    def on_delivery(err: ck.KafkaError | None, _msg: ck.Message) -> None:
        nonlocal errors
        if err is not None:
            errors += 1

    start = time.perf_counter()
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, value=value, partition=0, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.001)
    left = producer.flush(300)
    elapsed = time.perf_counter() - start
    if left or errors:
        raise RuntimeError(f"{left} undelivered and {errors} failed records")
    return elapsed


def consume(bootstrap: str, topic: str, count: int, window: int) -> tuple[int, float]:
    """(records read, seconds) for reading at least `count` records with assign (no
    group), in passes over the last `window` records of the partition.

    Each pass is timed from its assign or seek to its last record, so every record crosses the
    broker's fetch path inside the timed span (no read from a queue prefetched before
    the clock started). The mock keeps only its last few MB, so both brokers are read
    over that same window, in as many passes as `count` needs.
    """
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, **CONSUMER_CONF})
    try:
        low, high = consumer.get_watermark_offsets(ck.TopicPartition(topic, 0), timeout=30)
        start = max(low, high - window)
        got = 0
        busy = 0.0
        deadline = time.perf_counter() + 300
        consumer.assign([ck.TopicPartition(topic, 0, start)])
        while got < count:
            began = time.perf_counter()
            if got:
                consumer.seek(ck.TopicPartition(topic, 0, start))
            position = start
            while position < high:
                # A batch that fits the window: consume() returns once it has that many.
                for m in consumer.consume(min(1000, high - position), 0.5):
                    if m.error() is not None:
                        raise RuntimeError(f"consume error: {m.error()}")
                    position = m.offset() + 1
                    got += 1
                if time.perf_counter() > deadline:
                    raise RuntimeError(f"consumed {got} of {count} in 300 s")
            busy += time.perf_counter() - began
        return got, busy
    finally:
        consumer.close()


def retained(bootstrap: str, topic: str) -> int:
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, **CONSUMER_CONF})
    try:
        low, high = consumer.get_watermark_offsets(ck.TopicPartition(topic, 0), timeout=30)
        return int(high - low)
    finally:
        consumer.close()


def run_mock(count: int, size: int, run: int) -> Result:
    """The same workload against librdkafka's in-process mock cluster."""
    producer = ck.Producer({"test.mock.num.brokers": 1, **PRODUCER_CONF})
    topic = f"bench-{size}-{run}"
    brokers = producer.list_topics(timeout=10).brokers.values()
    bootstrap = ",".join(f"{b.host}:{b.port}" for b in brokers)
    value = os.urandom(size)
    produce_s = produce(producer, topic, count, value)
    # The mock cluster lives inside the producer: keep it alive while consuming.
    kept = retained(bootstrap, topic)
    consumed, consume_s = consume(bootstrap, topic, count, kept)
    del producer
    return Result(count, produce_s, consumed, consume_s, kept)


def run_epochlog(broker: BrokerProcess, count: int, size: int, run: int, window: int) -> Result:
    topic = f"bench-{size}-{run}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(60)
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap, **PRODUCER_CONF})
    value = os.urandom(size)
    producer.list_topics(topic, timeout=10)
    produce_s = produce(producer, topic, count, value)
    del producer
    consumed, consume_s = consume(broker.bootstrap, topic, count, window)
    return Result(count, produce_s, consumed, consume_s, count)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--records-100", type=int, default=300_000, help="records of 100 bytes")
    ap.add_argument("--records-1k", type=int, default=100_000, help="records of 1 KiB")
    ap.add_argument("--iperf-seconds", type=float, default=3.0)
    ap.add_argument("--no-broker", action="store_true", help="references only (mock, iperf3)")
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra broker setting, Kafka names",
    )
    args = ap.parse_args(argv)

    print(f"iperf3 loopback, {args.runs} x {args.iperf_seconds:g} s ...", flush=True)
    iperf = median([iperf3_loopback_bytes_per_s(args.iperf_seconds) for _ in range(args.runs)])
    print(f"iperf3 loopback: {iperf * 8 / 1e9:.2f} Gbit/s = {iperf / 1e6:,.0f} MB/s (median)")

    workloads = [(100, args.records_100), (1024, args.records_1k)]
    with tempfile.TemporaryDirectory(prefix="epochlog-bench-") as tmp:
        broker = None
        if not args.no_broker:
            settings = dict(s.split("=", 1) for s in args.set)
            broker = BrokerProcess(Path(tmp) / "logs", Path(tmp), settings).start()
            print(f"epochlog broker pid {broker.pid} at {broker.bootstrap}, log {broker.log_path}")
        try:
            for size, count in workloads:
                mock: list[Result] = []
                ours: list[Result] = []
                for run in range(args.runs):
                    mock.append(run_mock(count, size, run))
                    if broker is not None:
                        window = mock[-1].retained
                        ours.append(run_epochlog(broker, count, size, run, window))
                report(size, count, mock, ours, iperf)
            if broker is not None:
                print(f"broker peak RSS (VmHWM): {broker.peak_rss_bytes() / 2**20:.0f} MiB")
                broker.stop()
        finally:
            if broker is not None:
                broker.close()
    return 0


def report(size: int, count: int, mock: list[Result], ours: list[Result], iperf: float) -> None:
    print(f"\n{count:,} records of {size} bytes, medians of {len(mock)} runs:")
    for op in ("produce", "consume"):
        m_rate = median([r.rate(op) for r in mock])
        note = ""
        if op == "consume":
            kept = median([r.retained for r in mock])
            note = f"  [both read in passes over the last {kept:,.0f} records: what the mock keeps]"
        print(
            f"  {op:8} mock     {fmt_rate(m_rate, m_rate * size)}"
            f"  ({m_rate * size / iperf:.3f} of iperf3){note}"
        )
        if ours:
            o_rate = median([r.rate(op) for r in ours])
            print(
                f"  {op:8} epochlog {fmt_rate(o_rate, o_rate * size)}"
                f"  ({o_rate * size / iperf:.3f} of iperf3, {o_rate / m_rate:.2f} of mock)"
            )


if __name__ == "__main__":
    raise SystemExit(main())
