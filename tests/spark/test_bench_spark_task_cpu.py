"""bench/spark_task_cpu.py runs end to end in a tiny mode: the sink's task at its
default and at Kafka's Java batch.size, and the source's task, each charged its CPU.
Only completion and the rows handled are checked (the bench refuses a wrong count),
never speed."""

from __future__ import annotations

from support.bench import run_bench


def test_spark_task_cpu_benchmark_runs_in_a_tiny_mode() -> None:
    out = run_bench("spark_task_cpu.py", "--rows", "20000", "--runs", "1")
    for line in (
        "sink task, batch.size 1e6",
        "sink task, batch.size 16384",
        "source task, one partition",
        "sink default / Java's batch.size:",
    ):
        assert line in out, out
