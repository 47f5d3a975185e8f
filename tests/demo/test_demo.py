"""`epochlog demo --quick` end to end, as a user runs it: real broker processes, a real
unclean election by signals, a real PySpark pipeline. The demo's own checks decide its
exit code; this test also reads its summary for the lines that matter. It runs once on
PLAINTEXT and once with --secure (SASL_SSL between the brokers and for every client):
the same election, truncation and exactly-once output over authenticated TLS."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.long

# A hang guard for the whole run (Spark's start dominates on a busy machine).
DEMO_BOUND_S = 840


def _tails(data_dir: Path) -> str:
    logs = sorted(data_dir.glob("run-*/cluster/broker-*.log"))
    return "\n".join(f"--- {p}\n" + "\n".join(p.read_text().splitlines()[-30:]) for p in logs)


@pytest.mark.parametrize("flags", [[], ["--secure"]], ids=["plaintext", "sasl-ssl"])
def test_quick_demo_detects_the_truncation_and_writes_each_surviving_event_once(
    tmp_path: Path, flags: list[str]
) -> None:
    data_dir = tmp_path / "demo"
    result = subprocess.run(
        [sys.executable, "-m", "epochlog", "demo", "--quick", "--data-dir", str(data_dir), *flags],
        capture_output=True,
        text=True,
        timeout=DEMO_BOUND_S,
    )
    out = result.stdout
    # Spark's Java stack frames ("\tat ...") hide the Python error: leave them out.
    errors = "\n".join(
        line for line in result.stderr.splitlines() if not line.lstrip().startswith("at ")
    )
    context = f"exit {result.returncode}\n{out[-8000:]}\n{errors[-6000:]}\n{_tails(data_dir)}"
    assert result.returncode == 0, context
    assert re.search(r"epochlog demo: PASSED \((\d+)/\1 checks passed\)", out), context
    for check in (
        "unclean election",
        "quarantine holds every lost event",
        "truncation range reported",
        "exactly-once",
        "read-then-lost events are in quarantine",
        "aggregates match the events",
    ):
        assert f"PASS {check}:" in out, context
    # The source's report names each partition's exact lost range and where it resumed;
    # onTruncation=closest resumes at the divergence offset, where the range begins.
    reported = re.findall(
        r"events-(\d+): truncation of offsets (\d+)\.\.(\d+) \((\d+) records\),"
        r" planned in micro-batch \d+; onTruncation=closest resumed at offset (\d+)",
        out,
    )
    assert reported, context
    for _partition, first, last, count, resume in reported:
        assert int(last) - int(first) + 1 == int(count) and resume == first, context
    # What the brokers kept aside, as `epochlog quarantine list` prints it.
    assert re.search(r"events-\d+: offsets \d+\.\.\d+ epochs \[0\]", out), context
    assert "surviving events exactly once in the output" in out, context
