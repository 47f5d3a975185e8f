"""bench/client_consume.py runs end to end in a tiny mode: every client consumes, the
decode and produce figures are printed. Only completion is checked, never speed."""

from __future__ import annotations

from support.bench import run_bench


def test_client_consume_benchmark_runs_in_a_tiny_mode() -> None:
    out = run_bench(
        "client_consume.py", "--records", "2000", "--runs", "1", "--produce-records", "500"
    )
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
