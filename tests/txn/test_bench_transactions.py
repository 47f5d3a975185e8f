"""bench/transactions.py runs end to end in a tiny mode (a smoke test of the program,
not a measurement): transactional produce beside idempotent produce and the mock
cluster, read_committed beside read_uncommitted, verified transactions beside
unverified ones."""

from __future__ import annotations

from support.bench import run_bench


def test_transactions_benchmark_runs_in_a_tiny_mode() -> None:
    out = run_bench("transactions.py", "--records", "20000", "--runs", "1")
    for line in (
        "of idempotent",
        "of mock",
        "read_committed consume",
        "of read_uncommitted",
        "of unverified",
    ):
        assert line in out, out
