"""The simulator's checkers (``sim/checkers.py``) over a chaos run's recorded history,
and the adapter one of them needs for real processes.

A chaos run records the same events as a simulated one (ack, failed, read, truncated,
final, offsets, client-epoch; see ``sim/checkers.py``) plus ``("nemesis", seconds,
what)`` lines the checkers ignore. Only the checkers whose evidence a chaos run records
are judged: the KIP-320 model's snapshot invariants need the in-process cluster the
simulator has, and the group checkers a group workload this run does not have. A
checker with no evidence at all fails: a run that acknowledged nothing proves nothing.

librdkafka acknowledges some records without an offset: those of a request whose answer
was lost, once a later batch of the same idempotent producer succeeded (the broker would
have refused it out of sequence had they not been written: an "implicit ack"). Such an
acknowledgement is placed where the final read holds its value, and if it holds it
nowhere it stays at offset -1, which lost-write reports as missing.

quarantine-complete is judged differently from the simulator, which journals every
byte its disk removed: a real broker's removals are not observable from outside, so
the adapter takes every record known to have been in a partition (acknowledged, or
handed out to the consumer) that the final read does not hold at its offset, and
demands it in that partition's quarantine on some broker.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from epochlog.protocol.records import build_batch
from epochlog.sim import checkers

# Each judged checker and the event kinds it cannot be judged without.
EVIDENCE: dict[str, tuple[str, ...]] = {
    "lost-write": ("ack", "final"),
    "inconsistent-offsets": ("read", "final"),
    "poll-skip-or-rewind": ("read",),
    "ListOffsetsMonotonic": ("offsets",),
    "StaleMetadataNeverUsed": ("client-epoch",),
}


@dataclass(frozen=True)
class Verdict:
    checker: str
    ok: bool
    details: str


def judge(
    history: checkers.History, topic: str, quarantined: Mapping[str, Sequence[bytes]]
) -> list[Verdict]:
    """One verdict per judged checker, then quarantine-complete over ``quarantined``
    (partition folder name, as ``topic-N``, -> the bytes of its quarantine files)."""
    history, implicit = place_implicit_acks(history)
    counts: dict[str, int] = {}
    for event in history:
        counts[str(event[0])] = counts.get(str(event[0]), 0) + 1
    verdicts = []
    for name, needs in EVIDENCE.items():
        missing = [kind for kind in needs if not counts.get(kind)]
        if missing:
            verdicts.append(Verdict(name, False, f"no evidence: no {', '.join(missing)} events"))
            continue
        problems = checkers.CHECKERS[name](history)
        seen = ", ".join(f"{counts[kind]:,} {kind}" for kind in needs)
        if name == "lost-write" and implicit:
            seen += f" events ({implicit} acks without an offset, placed by value)"
        else:
            seen += " events"
        verdicts.append(_verdict(name, problems, f"held over {seen}"))
    lost = lost_records(history, topic)
    problems = checkers.quarantine_complete(lost, quarantined)
    files = sum(len(v) for v in quarantined.values())
    held = f"{len(lost)} known records gone from the final log; {files} quarantine files"
    verdicts.append(_verdict("quarantine-complete", problems, held))
    return verdicts


def place_implicit_acks(history: checkers.History) -> tuple[list[checkers.Event], int]:
    """The history with each acknowledgement that came without an offset given the
    final read's offset of its value in its partition (-1 when it has none), and how
    many there were."""
    where = {(e[1], e[3]): e[2] for e in history if e[0] == "final"}
    placed: list[checkers.Event] = []
    implicit = 0
    for e in history:
        if e[0] == "ack" and e[3] is None:
            implicit += 1
            e = ("ack", e[1], e[2], where.get((e[2], checkers.value_of(e[1])), -1))  # type: ignore[arg-type]
        placed.append(e)
    return placed, implicit


def _verdict(name: str, problems: list[str], held: str) -> Verdict:
    if not problems:
        return Verdict(name, True, held)
    return Verdict(name, False, f"{len(problems)} violations, first: {problems[0]}")


def lost_records(history: checkers.History, topic: str) -> list[tuple[str, bytes]]:
    """Each record known to have been at an offset (acknowledged there, or handed out
    from there) that the final read does not hold there, as a one-record batch at that
    offset under ``topic-N/`` (the shape ``checkers.quarantine_complete`` takes)."""
    final = {(e[1], e[2]): e[3] for e in history if e[0] == "final"}
    known: dict[tuple[object, object], bytes] = {}
    for e in history:
        if e[0] == "ack":
            known[(e[2], e[3])] = checkers.value_of(e[1])  # type: ignore[arg-type]
        elif e[0] == "read":
            known.setdefault((e[1], e[2]), e[3])  # type: ignore[arg-type]
    return [
        (
            f"{topic}-{partition}/lost",
            build_batch([(None, value, (), 0)], base_offset=offset),  # type: ignore[arg-type]
        )
        for (partition, offset), value in sorted(known.items())  # type: ignore[type-var]
        if final.get((partition, offset)) != value
    ]


def read_quarantines(log_dirs: Sequence[str], topic: str) -> dict[str, list[bytes]]:
    """``topic-N`` -> the bytes of every quarantine file of that partition on any of
    the brokers' log directories."""
    # Here, not at the top: `epochlog --help` loads this module, and the storage
    # package (numpy among it) is 0.2 s of CPU a command that does not need it.
    from epochlog.storage.quarantine import QUARANTINE_DIR

    kept: dict[str, list[bytes]] = {}
    for log_dir in log_dirs:
        if not os.path.isdir(log_dir):
            continue
        for folder in sorted(os.listdir(log_dir)):
            if not folder.startswith(f"{topic}-"):
                continue
            where = os.path.join(log_dir, folder, QUARANTINE_DIR)
            if not os.path.isdir(where):
                continue
            for name in sorted(os.listdir(where)):
                if name.endswith(".log"):
                    with open(os.path.join(where, name), "rb") as source:
                        kept.setdefault(folder, []).append(source.read())
    return kept


def table(verdicts: Sequence[Verdict]) -> str:
    """The checkers' table as the command prints it."""
    width = max(len(v.checker) for v in verdicts)
    lines = [f"{'checker':<{width}}  verdict  details"]
    for v in verdicts:
        lines.append(f"{v.checker:<{width}}  {'ok' if v.ok else 'FAILED':<7}  {v.details}")
    return "\n".join(lines)
