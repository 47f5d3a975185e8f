"""The demo's reading of the evidence, on fixed inputs: the source's truncation events
in the checkpoint's end offsets, its DataLossError inside Spark's exception text, and
the checks built from the ids of surviving, written and quarantined events."""

from __future__ import annotations

from epochlog.demo.report import Outcome, _error_lines, _ranges, judge, source_reports
from epochlog.demo.verify import Quarantined

TRUNCATION = {
    "event": "truncation",
    "topic": "events",
    "partition": 0,
    "lostFrom": 3,
    "lostUntil": 5,
    "policy": "closest",
    "resumeAt": 3,
    "message": "events-0: offsets 3..4 (2 records) read by the query were removed",
}


def test_source_reports_are_taken_once_from_the_end_offsets() -> None:
    positions = {"topics": {"events": {"id": "x", "partitions": {"0": {"offset": 5}}}}}
    offsets = [
        (0, {**positions, "events": [{"event": "newPartition", "partition": 0}]}),
        (1, positions),
        (2, {**positions, "events": [TRUNCATION]}),
        (3, {**positions, "events": [TRUNCATION]}),  # carried over: reported once
        (4, "not json"),
    ]
    assert source_reports(offsets) == [(2, TRUNCATION)]


def test_data_loss_error_lines_name_each_loss_without_the_resume_clause() -> None:
    error = (
        "py4j ... epochlog.spark.offsets.DataLossError: epochlog source: data loss detected:"
        " events-0: offsets 3..4 (2 records) read by the query were removed by log"
        " truncation (leader epoch 1); reading resumes at offset 3; events-2: offsets 7..9"
        " (3 records) read by the query were removed by log truncation (leader epoch 1);"
        " reading resumes at offset 7. The query stops (onTruncation=fail); set ..."
    )
    assert _error_lines(error) == [
        "the query stopped (onTruncation=fail) on:",
        "  events-0: offsets 3..4 (2 records) read by the query were removed by log"
        " truncation (leader epoch 1)",
        "  events-2: offsets 7..9 (3 records) read by the query were removed by log"
        " truncation (leader epoch 1)",
    ]


def test_ranges_are_runs_of_offsets() -> None:
    assert _ranges([5, 3, 4, 9]) == "3..5, 9"
    assert _ranges([]) == "none"


def _outcome(written: list[str], sink_ids: list[str] | None = None) -> Outcome:
    """Partition 0: offsets 0..2 survive (a, b, c), 3..4 were lost (x, y) and replaced by
    (d, e) from the new leader; x and y are in quarantine."""
    quarantine = Quarantined(
        lines=["broker-0: events-0: offsets 3..4 epochs [0]"],
        ranges={0: (3, 4, [0])},
        event_ids={"x", "y"},
    )
    where = {"a": 0, "b": 1, "c": 2, "x": 3, "y": 4, "d": 3, "e": 4}
    return Outcome(
        on_truncation="closest",
        lagging=2,
        killed=[0, 1],
        old_epochs={0: 0},
        new_epochs={0: 1},
        acked={i: (0, o) for i, o in where.items()},
        failed={},
        sent=len(where),
        surviving=[(i, 0, where[i]) for i in "abcde"],
        written=[(i, 0, where[i], n) for n, i in enumerate(written)],
        aggregate_total=len(written),
        quarantine=quarantine,
        offsets=[(3, {"events": [TRUNCATION]})],
        query_error=None,
        batches=len(written),
        sink_ids=list(written) if sink_ids is None else sink_ids,
        sink_restarts=1,
    )


def test_every_check_passes_when_each_surviving_event_is_written_once() -> None:
    checks = judge(_outcome(["a", "b", "c", "x", "y", "d", "e"]))
    assert [(c.name, c.passed) for c in checks] == [
        ("unclean election", True),
        ("quarantine holds every lost event", True),
        ("truncation range reported", True),
        ("exactly-once", True),
        ("read-then-lost events are in quarantine", True),
        ("exactly-once sink", True),
        ("aggregates match the events", True),
    ]


def test_a_duplicate_or_a_missing_event_fails_exactly_once() -> None:
    for written in (["a", "b", "c", "d", "e", "e"], ["a", "b", "c", "d"]):
        checks = {c.name: c.passed for c in judge(_outcome(written))}
        assert checks["exactly-once"] is False, written


def test_a_truncation_the_source_did_not_report_fails_the_range_check() -> None:
    outcome = _outcome(["a", "b", "c", "x", "y", "d", "e"])
    outcome.offsets = []
    checks = {c.name: c.passed for c in judge(outcome)}
    assert checks["truncation range reported"] is False


def test_a_duplicate_or_a_missing_event_in_the_sink_topic_fails_its_check() -> None:
    written = ["a", "b", "c", "x", "y", "d", "e"]
    for sink_ids in (written + ["d"], ["a", "b", "c", "d"]):
        checks = {c.name: c.passed for c in judge(_outcome(written, sink_ids))}
        assert checks["exactly-once sink"] is False, sink_ids
        assert checks["exactly-once"] is True
