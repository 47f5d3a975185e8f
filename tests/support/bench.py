"""A bench/ program run in a tiny mode, as the benchmarks' smoke tests run them: only
completion and what it prints are checked, never speed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parents[2] / "bench"


def run_bench(program: str, *args: str, timeout: float = 600) -> str:
    """What ``bench/<program>`` printed, run to its end with ``args``; fails with the
    tail of its output if it exits non-zero."""
    done = subprocess.run(
        [sys.executable, str(BENCH_DIR / program), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    return done.stdout
