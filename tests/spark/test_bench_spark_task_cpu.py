"""bench/spark_task_cpu.py runs end to end in a tiny mode: the sink's task at its
default and at Kafka's Java batch.size, and the source's task, each charged its CPU.
Only completion and the rows handled are checked (the bench refuses a wrong count),
never speed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "spark_task_cpu.py"


def test_spark_task_cpu_benchmark_runs_in_a_tiny_mode() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH), "--rows", "20000", "--runs", "1"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    for line in (
        "sink task, batch.size 1e6",
        "sink task, batch.size 16384",
        "source task, one partition",
        "sink default / Java's batch.size:",
    ):
        assert line in done.stdout, done.stdout
