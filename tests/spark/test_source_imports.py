"""Spark starts the source's planning process afresh for every streaming query
(``python_streaming_source_runner``): every module it imports is paid again per query.
A plaintext source must not load TLS, SCRAM or numba (together 0.3 s a query)."""

from __future__ import annotations

from support.fresh_imports import loaded_after

HEAVY = ("cryptography", "scramp", "numba")


def test_the_planning_process_loads_no_tls_scram_or_compiler() -> None:
    code = (
        "from pyspark_epochlog import DefaultSource\n"
        "import epochlog.spark.stream_reader\n"
        "import epochlog.spark.leader_view\n"
    )
    assert loaded_after(code, HEAVY) == []
