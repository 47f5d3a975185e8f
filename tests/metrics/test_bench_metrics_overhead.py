"""bench/metrics_overhead.py runs end to end in a tiny mode (a smoke test of the
program, not a measurement): a scraped broker beside an uncounted one."""

from __future__ import annotations

from support.bench import run_bench


def test_metrics_overhead_benchmark_runs_in_a_tiny_mode() -> None:
    out = run_bench("metrics_overhead.py", "--records", "20000", "--runs", "1")
    assert "of uncounted" in out, out
    assert " scrapes of ~" in out, out
    assert "broker CPU for the same records: uncounted / scraped" in out, out
