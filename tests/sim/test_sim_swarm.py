"""CI's swarm: a fixed list of seeds and fresh ones (printed, to be replayed), each a
simulated cluster under every fault kind, every invariant checked."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from epochlog.cli.main import main

pytestmark = pytest.mark.long

FIXED = int(os.environ.get("EPOCHLOG_SIM_FIXED_SEEDS", "150"))
FRESH = int(os.environ.get("EPOCHLOG_SIM_FRESH_SEEDS", "50"))


@pytest.mark.parametrize("kind", ["fixed", "fresh"])
def test_a_swarm_of_seeds_holds_every_invariant(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, count = (1, FIXED) if kind == "fixed" else (int.from_bytes(os.urandom(3)), FRESH)
    args = ["sim", "--seed", str(first), "--seeds", str(count), "--duration", "10"]
    code = main([*args, "--jobs", "2", "--trace-dir", str(tmp_path)])
    out = capsys.readouterr().out
    summary = out.strip().splitlines()[-1] if code == 0 else out
    with capsys.disabled():
        print(f"\n{kind} seeds {first}..{first + count - 1}: {summary}")
    assert code == 0, f"replay with: epochlog {' '.join(args)}\n{out}"
