"""bench/transactions.py runs end to end in a tiny mode (a smoke test of the program,
not a measurement): transactional produce beside idempotent produce and the mock
cluster, read_committed beside read_uncommitted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "transactions.py"


def test_transactions_benchmark_runs_in_a_tiny_mode() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH), "--records", "20000", "--runs", "1"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    out = done.stdout
    for line in ("of idempotent", "of mock", "read_committed consume", "of read_uncommitted"):
        assert line in out, out
