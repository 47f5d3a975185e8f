"""Peak resident memory of one broker while it takes and holds ~10 GB of log.

The broker must keep memory flat as its log grows (segments on disk, sparse
indexes): the target is a peak RSS (VmHWM) under 300 MB at 10 GB. Large batches
keep the client's share of the time small. Prints figures; asserts nothing.

    python bench/rss_10gb.py [--gb 10] [--dir /var/tmp] [--read-gb 1]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import BrokerProcess  # noqa: E402

GIB = 1 << 30
TARGET_RSS = 300 * 10**6


def rss_sampler(pid: int, stop: threading.Event, peak: list[int]) -> None:
    """Sample VmRSS twice a second: shows when the peak happened, beside VmHWM."""
    while not stop.wait(0.5):
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    peak[0] = max(peak[0], int(line.split()[1]) * 1024)
        except OSError:
            return


def fill(bootstrap: str, topic: str, total: int, value_size: int) -> float:
    """Produce `total` bytes of values in ~1 MB batches; returns seconds taken."""
    producer = ck.Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "queue.buffering.max.kbytes": 256 * 1024,
        }
    )
    value = os.urandom(value_size)
    failures = 0

    def on_delivery(err: ck.KafkaError | None, _msg: ck.Message) -> None:
        nonlocal failures
        failures += err is not None

    start = time.perf_counter()
    sent = 0
    next_report = GIB
    while sent < total:
        try:
            producer.produce(topic, value=value, partition=0, on_delivery=on_delivery)
            sent += value_size
        except BufferError:
            producer.poll(0.01)
        if sent >= next_report:
            producer.poll(0)
            rate = sent / (time.perf_counter() - start) / 1e6
            print(f"  {sent / GIB:.0f} GiB sent, {rate:.0f} MB/s", flush=True)
            next_report += GIB
    left = producer.flush(600)
    if left or failures:
        raise SystemExit(f"{left} undelivered, {failures} failed records")
    return time.perf_counter() - start


def read_back(bootstrap: str, topic: str, total: int) -> float:
    """Read `total` bytes from the start: the fetch path must not grow memory either."""
    consumer = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "epochlog-bench-unused",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([ck.TopicPartition(topic, 0, 0)])
        got = 0
        start = time.perf_counter()
        while got < total and time.perf_counter() - start < 1200:
            for m in consumer.consume(1000, 1.0):
                if m.error() is None:
                    got += len(m.value() or b"")
        return time.perf_counter() - start
    finally:
        consumer.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gb", type=float, default=10.0, help="GB (10^9 bytes) of values to write")
    ap.add_argument("--value-bytes", type=int, default=100_000)
    ap.add_argument("--segment-bytes", type=int, default=GIB)
    ap.add_argument("--read-gb", type=float, default=1.0, help="then read this much back")
    ap.add_argument("--dir", default=None, help="where the log goes (default: a temp dir)")
    args = ap.parse_args(argv)

    total = int(args.gb * 1e9)
    base = Path(tempfile.mkdtemp(prefix="epochlog-rss-", dir=args.dir))
    free = shutil.disk_usage(base).free
    if free < total * 1.1:
        raise SystemExit(f"{base} has {free / 1e9:.1f} GB free, need {total * 1.1 / 1e9:.1f}")
    broker = BrokerProcess(base / "logs", base, {"log.segment.bytes": args.segment_bytes})
    try:
        broker.start()
        print(f"broker pid {broker.pid} at {broker.bootstrap}, log in {base}")
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # alive until answered
        admin.create_topics([NewTopic("rss", 1, 1)])["rss"].result(60)
        stop = threading.Event()
        peak = [0]
        sampler = threading.Thread(target=rss_sampler, args=(broker.pid, stop, peak))
        sampler.start()
        try:
            secs = fill(broker.bootstrap, "rss", total, args.value_bytes)
            on_disk = sum(p.stat().st_size for p in (base / "logs").rglob("*") if p.is_file())
            print(
                f"wrote {total / 1e9:.1f} GB in {secs:.0f} s ({total / secs / 1e6:.0f} MB/s);"
                f" log on disk {on_disk / 1e9:.2f} GB"
            )
            hwm_after_fill = broker.peak_rss_bytes()
            if args.read_gb > 0:
                rsecs = read_back(broker.bootstrap, "rss", int(args.read_gb * 1e9))
                print(f"read back {args.read_gb:g} GB in {rsecs:.0f} s")
        finally:
            stop.set()
            sampler.join()
        hwm = broker.peak_rss_bytes()
        verdict = "under" if hwm < TARGET_RSS else "OVER"
        print(
            f"peak RSS (VmHWM): {hwm / 1e6:.0f} MB after fill {hwm_after_fill / 1e6:.0f} MB;"
            f" sampled VmRSS max {peak[0] / 1e6:.0f} MB;"
            f" {verdict} the {TARGET_RSS / 1e6:.0f} MB target"
        )
        broker.stop()
    finally:
        broker.close()
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
