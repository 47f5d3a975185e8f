"""bench/metrics_overhead.py runs end to end in a tiny mode (a smoke test of the
program, not a measurement): a scraped broker beside an uncounted one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "metrics_overhead.py"


def test_metrics_overhead_benchmark_runs_in_a_tiny_mode() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH), "--records", "20000", "--runs", "1"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    assert "of uncounted" in done.stdout, done.stdout
    assert " scrapes of ~" in done.stdout, done.stdout
    assert "broker CPU for the same records: uncounted / scraped" in done.stdout, done.stdout
