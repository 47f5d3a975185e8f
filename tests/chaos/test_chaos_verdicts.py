"""The chaos run's verdicts on recorded histories with faults planted in them: the
checkers cannot pass a run vacuously (a lost record, a silent skip, a record gone and
not in quarantine, a run with no evidence each fail and are named)."""

from __future__ import annotations

from pathlib import Path

from epochlog.chaos import verdicts
from epochlog.chaos.command import judge_saved
from epochlog.protocol.records import build_batch
from epochlog.sim.checkers import Event, value_of

TOPIC = "chaos"


def recorded(n: int = 6) -> list[Event]:
    """A run's history with nothing wrong: n records acknowledged at offsets 0.. of
    partition 0, read live, ListOffsets asked, an epoch held, read back."""
    history: list[Event] = [("client-epoch", "consumer", f"{TOPIC}-0", 0)]
    history += [("ack", i, 0, i) for i in range(n)]
    history += [("read", 0, i, value_of(i)) for i in range(n)]
    history += [("offsets", "latest", 0, n)]
    history += [("final", 0, i, value_of(i)) for i in range(n)]
    return history


def failed(history: list[Event], kept: dict[str, list[bytes]] | None = None) -> dict[str, str]:
    return {v.checker: v.details for v in verdicts.judge(history, TOPIC, kept or {}) if not v.ok}


def test_a_sound_history_holds_every_checker() -> None:
    assert failed(recorded()) == {}


def test_a_record_removed_from_the_final_read_is_a_lost_write_not_in_quarantine() -> None:
    history = [e for e in recorded() if e != ("final", 0, 3, value_of(3))]
    found = failed(history)
    assert set(found) == {"lost-write", "quarantine-complete"}
    assert "record 3 acknowledged at 0/3: missing" in found["lost-write"]
    assert "offset 3" in found["quarantine-complete"]


def test_a_lost_record_kept_in_quarantine_is_still_a_lost_write() -> None:
    history = [e for e in recorded() if e != ("final", 0, 3, value_of(3))]
    kept = {f"{TOPIC}-0": [build_batch([(None, value_of(3), (), 0)], base_offset=3)]}
    assert set(failed(history, kept)) == {"lost-write"}


def test_a_silent_skip_fails_poll_skip_or_rewind_unless_reported() -> None:
    history = [e for e in recorded() if e != ("read", 0, 2, value_of(2))]
    assert "skipped to 3, expected 2" in failed(history)["poll-skip-or-rewind"]
    reported = history[: history.index(("read", 0, 3, value_of(3)))]
    reported += [("truncated", 0, 3)] + history[len(reported) :]
    assert "poll-skip-or-rewind" not in failed(reported)


def test_a_run_without_evidence_fails() -> None:
    found = failed([e for e in recorded() if e[0] not in ("ack", "offsets")])
    assert found["lost-write"] == "no evidence: no ack events"
    assert found["ListOffsetsMonotonic"] == "no evidence: no offsets events"


def test_a_saved_run_is_judged_again_from_its_folder(tmp_path: Path) -> None:
    quarantine = tmp_path / "broker-1" / f"{TOPIC}-0" / "quarantine"
    quarantine.mkdir(parents=True)
    (quarantine / "00000000000000000003.log").write_bytes(
        build_batch([(None, value_of(3), (), 0)], base_offset=3)
    )
    lines = [repr(e) for e in recorded() if e != ("final", 0, 3, value_of(3))]
    (tmp_path / "history.txt").write_text("# fault none\n" + "\n".join(lines) + "\n")
    found = {v.checker: v.ok for v in judge_saved(str(tmp_path))}
    assert found["lost-write"] is False
    assert found["quarantine-complete"] is True


def test_an_ack_without_an_offset_is_placed_by_its_value_or_is_a_lost_write() -> None:
    history = recorded()
    history[history.index(("ack", 2, 0, 2))] = ("ack", 2, 0, None)
    assert failed(history) == {}
    assert "1 acks without an offset" in verdicts.judge(history, TOPIC, {})[0].details
    lost = [e for e in history if e != ("final", 0, 2, value_of(2))]
    assert "record 2 acknowledged at 0/-1: missing" in failed(lost)["lost-write"]
