"""bench/spark_read.py runs end to end in a tiny mode: the epochlog source, the
from-memory reference source, parquet and the sink are all timed and the ratios
printed. Only completion and row counts are checked, never speed."""

from __future__ import annotations

from support.bench import run_bench


def test_spark_read_benchmark_runs_in_a_tiny_mode() -> None:
    out = run_bench("spark_read.py", "--records", "3000", "--runs", "1", "--sink", timeout=900)
    for line in (
        "run 1: epochlog",
        "epochlog / parquet:",
        "memory / parquet",
        "do-nothing Python sink",
    ):
        assert line in out, out
