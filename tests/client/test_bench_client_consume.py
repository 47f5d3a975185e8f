"""bench/client_consume.py runs end to end in a tiny mode: every client consumes, the
decode and produce figures are printed. Only completion is checked, never speed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "client_consume.py"


def test_client_consume_benchmark_runs_in_a_tiny_mode() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH), "--records", "2000", "--runs", "1"]
        + ["--produce-records", "500"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    out = done.stdout
    for name in (
        "epochlog poll_arrow",
        "epochlog poll",
        "confluent-kafka",
        "kafka-python",
        "aiokafka",
        "arrow decode",
        "epochlog Producer",
    ):
        assert f"{name} " in out, out
    assert "x confluent-kafka" in out
