"""bench/many_clients.py runs end to end in a tiny mode: producer and consumer processes
against the broker and librdkafka's mock cluster, every ratio printed. Only completion
is checked, never speed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "many_clients.py"


def test_many_clients_benchmark_runs_in_a_tiny_mode() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH), "--runs", "1", "--producers", "2", "--consumers", "2"]
        + ["--partitions", "4", "--records-100", "2000", "--records-1k", "400"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    for op in ("produce", "consume"):
        for size in ("100 B", "1024 B"):
            assert any(
                op in line and size in line and "of mock" in line
                for line in done.stdout.splitlines()
            ), done.stdout
