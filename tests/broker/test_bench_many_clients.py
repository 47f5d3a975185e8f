"""bench/many_clients.py runs end to end in a tiny mode: producer and consumer processes
against the broker and librdkafka's mock cluster, every ratio printed. Only completion
is checked, never speed."""

from __future__ import annotations

from support.bench import run_bench


def test_many_clients_benchmark_runs_in_a_tiny_mode() -> None:
    out = run_bench(
        "many_clients.py",
        *("--runs", "1", "--producers", "2", "--consumers", "2", "--partitions", "4"),
        *("--records-100", "2000", "--records-1k", "400"),
    )
    for op in ("produce", "consume"):
        for size in ("100 B", "1024 B"):
            assert any(
                op in line and size in line and "of mock" in line for line in out.splitlines()
            ), out
