"""The summary: what the unclean election lost, what the source detected and decided,
what the brokers kept in quarantine, and the checks that decide the exit code."""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from epochlog.demo.progress import print_block
from epochlog.demo.verify import Check, Quarantined, duplicates


@dataclass
class Outcome:
    on_truncation: str
    lagging: int
    killed: list[int]
    old_epochs: dict[int, int]
    new_epochs: dict[int, int]
    acked: dict[str, tuple[int, int]]
    failed: dict[str, str]
    sent: int
    surviving: list[tuple[str, int, int]]
    written: list[tuple[str, int, int, int]]
    aggregate_total: int
    quarantine: Quarantined
    offsets: list[tuple[int, Any]]
    query_error: str | None
    batches: int
    # The exactly-once sink's output topic, read with read_committed, and how often its
    # query was restarted from its checkpoint.
    sink_ids: list[str]
    sink_restarts: int


def source_reports(offsets: list[tuple[int, Any]]) -> list[tuple[int, dict[str, Any]]]:
    """(batch id, event) for each loss the source recorded in an end offset's
    ``events`` (truncation, retention, re-created topic), once each."""
    seen: set[str] = set()
    out = []
    for batch_id, end in offsets:
        events = end.get("events", []) if isinstance(end, dict) else []
        for event in events:
            if not isinstance(event, dict) or event.get("event") == "newPartition":
                continue
            key = repr(sorted(event.items()))
            if key not in seen:
                seen.add(key)
                out.append((batch_id, event))
    return out


def _describe(batch_id: int, e: dict[str, Any]) -> str:
    lost_from, lost_until = int(e.get("lostFrom", -1)), int(e.get("lostUntil", -1))
    span = (
        f"offsets {lost_from}..{lost_until - 1} ({lost_until - lost_from} records)"
        if lost_from >= 0
        else f"offsets below {lost_until} (divergence unknown)"
    )
    return (
        f"{e.get('topic')}-{e.get('partition')}: {e.get('event')} of {span}, planned in"
        f" micro-batch {batch_id}; onTruncation={e.get('policy')} resumed at offset"
        f" {e.get('resumeAt')}"
    )


def _error_lines(error: str) -> list[str]:
    """The source's DataLossError inside Spark's exception text, one loss a line."""
    marker = "data loss detected: "
    at = error.find(marker)
    if at < 0:
        return [f"the query stopped with: {error.splitlines()[0][:400]}"]
    text = error[at + len(marker) :].split(". The query stops", 1)[0]
    losses = re.split(r"; (?=[\w.-]+-\d+: )", text)
    # Under fail nothing resumes: leave out the policy's resume clause.
    return ["the query stopped (onTruncation=fail) on:"] + [
        "  " + re.sub(r"; reading resumes at offset \d+$", "", loss) for loss in losses
    ]


def _ranges(offsets: list[int]) -> str:
    if not offsets:
        return "none"
    offsets = sorted(offsets)
    runs, start, prev = [], offsets[0], offsets[0]
    for o in offsets[1:]:
        if o != prev + 1:
            runs.append((start, prev))
            start = o
        prev = o
    runs.append((start, prev))
    return ", ".join(f"{a}..{b}" if a != b else str(a) for a, b in runs)


def judge(o: Outcome) -> list[Check]:
    """Print what happened and return the checks."""
    checks: list[Check] = []
    surviving_ids = {i for i, _, _ in o.surviving}
    written_ids = [i for i, _, _, _ in o.written]
    lost_acked = {i: where for i, where in o.acked.items() if i not in surviving_ids}
    by_partition: dict[int, list[int]] = defaultdict(list)
    for _, (partition, offset) in lost_acked.items():
        by_partition[partition].append(offset)

    print_block(
        "unclean election",
        [
            f"broker {o.lagging} (paused, out of the ISR) became leader of every partition;"
            f" brokers {o.killed} were SIGKILLed",
            f"leader epochs {o.old_epochs} -> {o.new_epochs}",
            f"{o.sent} events produced with acks=1, {len(o.acked)} acknowledged,"
            f" {len(o.failed)} failed",
            f"{len(lost_acked)} acknowledged events are no longer in the topic: "
            + "; ".join(
                f"{p}: offsets {_ranges(offs)}" for p, offs in sorted(by_partition.items())
            ),
        ],
    )
    checks.append(
        Check(
            "unclean election",
            all(o.new_epochs[p] > o.old_epochs[p] for p in o.old_epochs) and bool(lost_acked),
            f"broker {o.lagging} leads at higher epochs; {len(lost_acked)} acknowledged"
            " events lost",
        )
    )

    q = o.quarantine
    print_block("quarantine (epochlog quarantine list)", q.lines or ["nothing quarantined"])
    missing_from_q = sorted(set(lost_acked) - q.event_ids)
    checks.append(
        Check(
            "quarantine holds every lost event",
            bool(q.lines) and not missing_from_q,
            f"{len(q.event_ids)} events kept aside; lost acknowledged events not found there:"
            f" {len(missing_from_q)}",
        )
    )

    reports = source_reports(o.offsets)
    report_lines = [_describe(b, r) for b, r in reports]
    if o.query_error:
        report_lines += _error_lines(o.query_error)
    print_block(
        f"what the source detected (onTruncation={o.on_truncation})",
        report_lines or ["no truncation reported"],
    )
    exact = []
    for partition, (first, last, epochs) in sorted(q.ranges.items()):
        named = [
            r
            for _, r in reports
            if r.get("event") == "truncation"
            and int(r.get("partition", -1)) == partition
            and int(r.get("lostFrom", -1)) == first
            and first < int(r.get("lostUntil", -1)) <= last + 1
        ]
        in_error = o.query_error is not None and (
            f"-{partition}: offsets {first}.." in o.query_error
        )
        exact.append((partition, first, last, epochs, bool(named) or in_error))
    checks.append(
        Check(
            "truncation range reported",
            bool(exact) and all(e[4] for e in exact),
            "; ".join(
                f"{p}: lost offsets {first}..{last} epochs {epochs}"
                f" {'reported' if ok else 'NOT reported'} by the source"
                for p, first, last, epochs, ok in exact
            )
            or "no truncation in quarantine",
        )
    )

    dups = duplicates(written_ids)
    read_then_lost = sorted(set(written_ids) - surviving_ids)
    not_kept = [i for i in read_then_lost if i not in q.event_ids]
    missing = sorted(surviving_ids - set(written_ids))
    print_block(
        "what the pipeline did",
        [
            f"{o.batches} micro-batches, {len(written_ids)} rows in parquet,"
            f" per-user aggregates over {o.aggregate_total} events",
            f"{len(read_then_lost)} events were read before the election and lost by it"
            f" (all in quarantine: {not not_kept and bool(read_then_lost)})",
            f"{len(surviving_ids)} events survive in the topic (fresh batch read);"
            f" {len(missing)} of them are not in the output",
        ],
    )
    if o.on_truncation == "fail":
        ok = not dups and o.query_error is not None
        detail = (
            "query stopped on the truncation (onTruncation=fail); no event written twice"
            if ok
            else f"duplicates={len(dups)} query error={o.query_error!r}"
        )
    else:
        ok = not dups and not missing and o.query_error is None
        detail = (
            f"every one of {len(surviving_ids)} surviving events exactly once in the output"
            if ok
            else f"duplicates={len(dups)} missing={len(missing)} query error={o.query_error!r}"
        )
    checks.append(Check("exactly-once", ok, detail))
    checks.append(
        Check(
            "read-then-lost events are in quarantine",
            not not_kept,
            f"{len(read_then_lost)} events written before the truncation and lost since;"
            f" {len(not_kept)} not found in quarantine",
        )
    )
    sink_dups = duplicates(o.sink_ids)
    sink_missing = sorted(surviving_ids - set(o.sink_ids))
    sink_ok = not sink_dups and (o.on_truncation == "fail" or not sink_missing)
    print_block(
        "the exactly-once sink",
        [
            f"the same events into a topic through deliveryGuarantee=exactly-once; the query"
            f" was restarted from its checkpoint {o.sink_restarts} times",
            f"{len(o.sink_ids)} events read back with read_committed, {len(sink_dups)} of them"
            f" more than once; {len(sink_missing)} surviving events not there",
        ],
    )
    checks.append(
        Check(
            "exactly-once sink",
            sink_ok,
            f"{len(set(o.sink_ids))} events, each once, across {o.sink_restarts} query restarts"
            if sink_ok
            else f"duplicates={len(sink_dups)} missing={len(sink_missing)}",
        )
    )
    checks.append(
        Check(
            "aggregates match the events",
            o.aggregate_total == len(written_ids),
            f"sum of per-user counts {o.aggregate_total}, event rows {len(written_ids)}",
        )
    )
    return checks
