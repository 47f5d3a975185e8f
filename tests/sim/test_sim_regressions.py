"""A failing seed is shrunk to the shortest fault schedule that still breaks the same
checker and saved as a file that replays it; the committed ones must hold now."""

from __future__ import annotations

from pathlib import Path

import pytest

from epochlog.cli.main import main
from epochlog.replication.partition import Partition
from epochlog.sim.command import load_regression
from epochlog.sim.faults import Fault
from epochlog.sim.run import SimOptions, SimResult, run_seed
from epochlog.sim.shrink import broken, shrink

REGRESSIONS = Path(__file__).resolve().parent / "regressions"


def _hw_runs_ahead(self: Partition) -> bool:
    """A planted bug: the high watermark follows the leader's own log end."""
    moved = self.is_leader and self.log.log_end_offset > self.high_watermark
    if moved:
        self.high_watermark = self.log.log_end_offset
    return moved


def test_a_failing_seed_is_shrunk_and_saved_as_a_replayable_regression(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The planted bug needs no fault at all: every fault is dropped."""
    monkeypatch.setattr(Partition, "maybe_advance_high_watermark", _hw_runs_ahead)
    args = ["sim", "--seed", "2", "--duration", "12", "--faults", "kill,pause"]
    code = main([*args, "--trace-dir", str(tmp_path), "--save-regression", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 1 and "fault schedule:" in out
    assert "shrunk to 0 of" in out, out
    seed, options, schedule, names = load_regression(str(tmp_path / "seed-2.json"))
    assert (seed, options.duration, schedule) == (2, 12.0, [])
    assert "WeakIsr" in names
    assert broken(run_seed(seed, options, schedule)) & names
    monkeypatch.undo()
    assert run_seed(seed, options, schedule).ok


def test_every_saved_regression_holds_now() -> None:
    for path in sorted(REGRESSIONS.glob("*.json")):
        seed, options, schedule, names = load_regression(str(path))
        result = run_seed(seed, options, schedule)
        assert result.ok, f"{path.name} broke {broken(result)} again: {result.findings}"


def test_shrinking_drops_faults_one_at_a_time_then_halves_what_is_left() -> None:
    """A bug that shows only under a pause of b1 lasting at least 1 s."""
    tried: list[list[Fault]] = []

    def run(seed: int, options: SimOptions, schedule: list[Fault]) -> SimResult:
        tried.append(schedule)
        shows = any(f.kind == "pause" and f.broker == 1 and f.lasts >= 1.0 for f in schedule)
        return SimResult(seed, schedule, findings={"WeakIsr": ["x"] if shows else []})

    schedule = [
        Fault(1.0, "kill", 0, 2.0),
        Fault(4.0, "pause", 1, 5.0),
        Fault(9.0, "clock", 2, 1.0, salt=3),
    ]
    shrunk = shrink(7, SimOptions(), schedule, {"WeakIsr"}, run)
    assert shrunk == [Fault(4.0, "pause", 1, 1.25)]
    assert len(tried) == 3 + 3  # three drops tried, then 2.5 and 1.25 held, 0.625 did not
