"""What one Spark task of the epochlog connector costs, out of Spark: the sink's task
(``spark.sink.write_task``) writing Arrow batches to one broker, and the source's task
(``spark.partition_reader.read_partition``) reading one partition back, each timed and
charged the CPU time of the task's process and of the broker's over the run. It shows
where a Spark job's two cores go besides Spark's own work (ARCHITECTURE.md, "The
exactly-once Spark sink" and "The Spark connector").

The sink's default ``batch.size`` (1,000,000) is timed against Kafka's Java default
(16,384), given as ``kafka.batch.size`` in the same run: the reference of the ratio.
Rows: a 7-byte key and a 100-byte value, Arrow batches of 10,000 rows (what Spark
hands a Python writer), keyed over 2 partitions. Medians of --runs, min and max.

    python bench/spark_task_cpu.py [--runs 3] [--rows 3000000]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import BrokerProcess, median  # noqa: E402

from epochlog.spark.partition_reader import EpochlogInputPartition, read_partition  # noqa: E402
from epochlog.spark.sink import SinkOptions, parse_sink_options, write_task  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from support.clients import create_topic  # noqa: E402

BATCH_ROWS = 10_000
TOPIC = "bench-task-cpu"


def process_cpu_s(pid: int) -> float:
    """User and system CPU seconds of a process so far (/proc/<pid>/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed(broker_pid: int, rows: int, work: Callable[[], int]) -> tuple[float, float, float]:
    """(rows/s, task CPU ns a row, broker CPU ns a row) of ``work``, which returns the
    rows it handled; the task is this process."""
    broker_before, task_before = process_cpu_s(broker_pid), time.process_time()
    start = time.perf_counter()
    done = work()
    elapsed = time.perf_counter() - start
    if done != rows:
        raise SystemExit(f"handled {done} rows, expected {rows}")
    task_ns = (time.process_time() - task_before) / rows * 1e9
    broker_ns = (process_cpu_s(broker_pid) - broker_before) / rows * 1e9
    return rows / elapsed, task_ns, broker_ns


def arrow_batch() -> pa.RecordBatch:
    keys = pa.array([b"%7d" % i for i in range(BATCH_ROWS)], pa.binary())
    values = pa.array([(b"%010d" % i).ljust(100, b"v") for i in range(BATCH_ROWS)], pa.binary())
    return pa.RecordBatch.from_arrays([keys, values], names=["key", "value"])


def show(name: str, runs: list[tuple[float, float, float]]) -> None:
    rates, task, broker = zip(*runs, strict=True)
    print(
        f"{name:<28} {median(list(rates)):>12,.0f} rows/s ({min(rates):,.0f}-{max(rates):,.0f})"
        f"   CPU a row: task {median(list(task)):,.0f} ns, broker {median(list(broker)):,.0f} ns"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rows", type=int, default=3_000_000)
    args = parser.parse_args()
    rows = args.rows - args.rows % BATCH_ROWS
    batch = arrow_batch()

    with tempfile.TemporaryDirectory(prefix="epochlog-bench-task-") as tmp:
        broker = BrokerProcess(Path(tmp) / "logs", Path(tmp)).start()
        try:
            create_topic(broker.bootstrap, TOPIC, 2)
            options = {"bootstrap.servers": broker.bootstrap, "topic": TOPIC}
            sink = parse_sink_options(options)
            java_default = parse_sink_options({**options, "kafka.batch.size": "16384"})

            def write(with_options: SinkOptions) -> Callable[[], int]:
                def run() -> int:
                    return write_task(with_options, iter([batch] * (rows // BATCH_ROWS))).records

                return run

            write(sink)()  # untimed: numba's compiled code loaded, the topic's files made
            written: dict[str, list[tuple[float, float, float]]] = {"default": [], "java": []}
            for _ in range(args.runs):
                written["default"].append(timed(broker.pid, rows, write(sink)))
                written["java"].append(timed(broker.pid, rows, write(java_default)))

            # Partition 0 holds its share of every write so far; read the first ``rows``/2.
            until = rows // 2
            part = EpochlogInputPartition(
                TOPIC, 0, 0, -1, until, {"bootstrap.servers": broker.bootstrap}, False, 60_000
            )

            def read() -> int:
                return sum(b.num_rows for b in read_partition(part))

            read()
            reads = [timed(broker.pid, until, read) for _ in range(args.runs)]
        finally:
            broker.stop()

    print(f"{rows:,} rows of a 7-byte key and a 100-byte value, medians of {args.runs} runs")
    show("sink task, batch.size 1e6", written["default"])
    show("sink task, batch.size 16384", written["java"])
    show("source task, one partition", reads)
    ratios = [d[0] / j[0] for d, j in zip(written["default"], written["java"], strict=True)]
    print(
        f"sink default / Java's batch.size: {median(ratios):.2f} "
        f"({min(ratios):.2f}-{max(ratios):.2f})"
    )


if __name__ == "__main__":
    main()
