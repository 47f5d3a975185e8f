"""What metrics cost: confluent-kafka producing to a broker that serves /metrics and is
scraped every second (as Prometheus would), as a ratio to a second broker in the same
run that counts nothing (this program makes the request and topic counting no-ops and
serves no endpoint; no setting turns counting off). Runs alternate between the two;
the figures are the medians of the per-run ratios: throughput, and the broker's own
CPU for the same records (steadier where other work shares the cores).

    python bench/metrics_overhead.py [--runs 5] [--records 1000000] [--size 100]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import urllib.request
from pathlib import Path

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import BrokerProcess, fmt_rate, free_port, median  # noqa: E402
from produce_consume import PRODUCER_CONF, produce  # noqa: E402

# Put first on the reference broker's PYTHONPATH: its sitecustomize turns counting off.
UNCOUNTED_HOOK = Path(__file__).resolve().parent / "uncounted"
SCRAPE_INTERVAL_S = 1.0


class UncountedBroker(BrokerProcess):
    """The same command as the measured broker, with nothing counted."""

    def __init__(self, log_dir: Path, output_dir: Path) -> None:
        super().__init__(log_dir, output_dir)
        path = [str(UNCOUNTED_HOOK), *filter(None, [os.environ.get("PYTHONPATH")])]
        self.extra_env["PYTHONPATH"] = os.pathsep.join(path)


class Scraper:
    """GET /metrics every second from a thread, as a Prometheus server would."""

    def __init__(self, port: int) -> None:
        self.url = f"http://127.0.0.1:{port}/metrics"
        self.scrapes = 0
        self.bytes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Scraper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        while True:
            with urllib.request.urlopen(self.url, timeout=30) as answer:
                self.bytes += len(answer.read())
            self.scrapes += 1
            if self._stop.wait(SCRAPE_INTERVAL_S):
                return


def cpu_seconds(broker: BrokerProcess) -> float:
    """User and system CPU the broker process has used (/proc/<pid>/stat)."""
    fields = Path(f"/proc/{broker.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def produce_seconds(broker: BrokerProcess, topic: str, count: int, size: int) -> float:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(60)
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap, **PRODUCER_CONF})
    producer.list_topics(topic, timeout=10)
    return produce(producer, topic, count, b"x" * size)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    args = ap.parse_args(argv)
    metrics_port = free_port()
    with tempfile.TemporaryDirectory(prefix="epochlog-bench-metrics-") as tmp:
        scraped = BrokerProcess(
            Path(tmp) / "a",
            Path(tmp) / "a-out",
            settings={"metrics.listener": f"http://127.0.0.1:{metrics_port}"},
        ).start()
        reference = UncountedBroker(Path(tmp) / "b", Path(tmp) / "b-out").start()
        try:
            print(
                f"scraped {scraped.bootstrap} (metrics on port {metrics_port}),"
                f" uncounted {reference.bootstrap}"
            )
            for broker in (scraped, reference):
                produce_seconds(broker, "warm-up", 50_000, args.size)
            ratios, cpu_ratios, rates, scrapes, scraped_bytes = [], [], [], 0, 0
            for run in range(args.runs):
                topic = f"m-{run}"
                order = [scraped, reference] if run % 2 == 0 else [reference, scraped]
                seconds, cpu = {}, {}
                for broker in order:
                    side = "on" if broker is scraped else "off"
                    cpu_before = cpu_seconds(broker)
                    if broker is scraped:
                        with Scraper(metrics_port) as scraper:
                            seconds[side] = produce_seconds(broker, topic, args.records, args.size)
                        scrapes += scraper.scrapes
                        scraped_bytes = scraper.bytes // max(1, scraper.scrapes)
                    else:
                        seconds[side] = produce_seconds(broker, topic, args.records, args.size)
                    cpu[side] = cpu_seconds(broker) - cpu_before
                ratios.append(seconds["off"] / seconds["on"])
                if cpu["on"] > 0:  # (a run shorter than a clock tick of CPU measures none)
                    cpu_ratios.append(cpu["off"] / cpu["on"])
                rates.append(args.records / seconds["on"])
            rate = median(rates)
            print(
                f"  {args.size} B records, scraped every {SCRAPE_INTERVAL_S:.0f} s"
                f" ({scrapes} scrapes of ~{scraped_bytes} B)"
                f" {fmt_rate(rate, rate * args.size)}"
                f"  {median(ratios):.3f} of uncounted (runs: "
                + ", ".join(f"{r:.3f}" for r in ratios)
                + ")",
                flush=True,
            )
            # CPU per record is steadier than throughput on a shared machine.
            print(
                "  broker CPU for the same records: uncounted / scraped"
                + (f" {median(cpu_ratios):.3f}" if cpu_ratios else " too short to measure")
                + " (runs: "
                + ", ".join(f"{r:.3f}" for r in cpu_ratios)
                + ")",
                flush=True,
            )
            scraped.stop()
            reference.stop()
        finally:
            scraped.close()
            reference.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
