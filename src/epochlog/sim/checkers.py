"""The invariants a simulated run is held to, as pure functions of its history.

A history is a list of events (tuples whose first item names the kind):

    ("ack", i, partition, offset)           record i acknowledged (acks=all)
    ("read", partition, offset, value)      the live consumer handed out a record
    ("truncated", partition, divergence)    the live consumer reported a truncation
                                            (divergence None: not known) and moved there
    ("final", partition, offset, value)     the read of every partition after the run
    ("offsets", kind, partition, offset)    ListOffsets answered (kind: earliest|latest)
    ("client-epoch", client, tp, epoch)     the leader epoch a client holds for tp changed
    ("committed", members, ((p, o, e),...)) the group's members and committed offsets
                                            with their epochs (``sim/groups.py``)
    ("violated", name, problem, time)       a snapshot broke the KIP-320 model's
                                            invariant ``name`` (``sim/isr.py``)

Record i's value is ``value_of(i)``. Elections in a simulated run are clean, so a
record once acknowledged, or once handed out (it was below the high watermark), stays.
``quarantine_complete`` judges the disk instead: what the brokers removed from their
segments against what their quarantines hold.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterator, Mapping, Sequence

from epochlog.protocol.batch import read_header, validate_batch
from epochlog.protocol.errors import KafkaError
from epochlog.protocol.records import iter_records

Event = tuple[object, ...]
History = Sequence[Event]


def value_of(i: int) -> bytes:
    return b"v%d" % i


def lost_write(history: History) -> list[str]:
    """Every acknowledged record is in the final log, at the offset it was given."""
    final = {(e[1], e[2]): e[3] for e in history if e[0] == "final"}
    problems = []
    for e in history:
        if e[0] != "ack":
            continue
        _, i, partition, offset = e
        found = final.get((partition, offset))
        if found != value_of(i):  # type: ignore[arg-type]
            what = "missing" if found is None else f"holds {found!r}"
            problems.append(f"record {i} acknowledged at {partition}/{offset}: {what}")
    return problems


def inconsistent_offsets(history: History) -> list[str]:
    """One offset never holds two records: what the consumer was handed out is what the
    final log holds, unless it reported a truncation at or below that offset."""
    final = {(e[1], e[2]): e[3] for e in history if e[0] == "final"}
    seen: dict[tuple[object, object], object] = {}
    problems = []
    for e in history:
        if e[0] == "truncated":
            seen = {k: v for k, v in seen.items() if k[0] != e[1] or _below(k[1], e[2])}
        elif e[0] == "read":
            key = (e[1], e[2])
            if seen.setdefault(key, e[3]) != e[3]:
                problems.append(f"{key[0]}/{key[1]} handed out as {seen[key]!r} and {e[3]!r}")
    for key, value in seen.items():
        if key in final and final[key] != value:
            problems.append(f"{key[0]}/{key[1]} handed out as {value!r}, now {final[key]!r}")
    return problems


def poll_skip_and_rewind(history: History) -> list[str]:
    """The consumer hands out each partition's offsets one after another: no gap (a
    skip) and no step back (a rewind) but where it reported a truncation."""
    expected: dict[object, int] = {}
    problems = []
    for e in history:
        if e[0] == "truncated":
            expected.pop(e[1], None)  # where it goes on is the next read
        elif e[0] == "read":
            partition, offset = e[1], e[2]
            want = expected.get(partition)
            if want is not None and offset != want:
                kind = "skipped to" if offset > want else "rewound to"  # type: ignore[operator]
                problems.append(f"partition {partition}: {kind} {offset}, expected {want}")
            expected[partition] = offset + 1  # type: ignore[operator]
    return problems


def list_offsets_monotonic(history: History) -> list[str]:
    """KIP-207: what ListOffsets answers for a partition's earliest or latest offset
    never goes backwards, across leader changes too (a new leader answers
    OFFSET_NOT_AVAILABLE until its high watermark caught up). Only an unclean election
    may take it back, and a simulated run has none."""
    last: dict[tuple[object, object], int] = {}
    problems = []
    for e in history:
        if e[0] == "offsets":
            key, offset = (e[1], e[2]), e[3]
            if offset < last.get(key, offset):  # type: ignore[operator]
                problems.append(f"partition {e[2]}: {e[1]} offset {offset} after {last[key]}")
            last[key] = max(offset, last.get(key, offset))  # type: ignore[call-overload]
    return problems


# Judged on snapshots of the cluster (sim/isr.py), recorded as "violated" events.
SNAPSHOT_INVARIANTS = ("LeaderInIsr", "WeakIsr", "StrongIsr", "OfflineNeverJoinsIsr")


def stale_metadata_never_used(history: History) -> list[str]:
    """KIP-232: a client never goes back to metadata whose leader epoch for a partition
    is lower than one it already held (it refuses such a Metadata answer and asks
    again), so it never routes by a deposed leader's view."""
    held: dict[tuple[object, object], int] = {}
    problems = []
    for e in history:
        if e[0] == "client-epoch":
            key, epoch = (e[1], e[2]), e[3]
            if epoch < held.get(key, epoch):  # type: ignore[operator]
                problems.append(f"{e[1]}: {e[2]} went back to epoch {epoch} from {held[key]}")
            held[key] = max(epoch, held.get(key, epoch))  # type: ignore[call-overload]
    return problems


def offsets_of_live_groups_kept(history: History) -> list[str]:
    """KIP-211: a group's committed offsets expire only once it has been empty for the
    retention time: between two looks at a group that had members both times, no
    partition's committed offset disappears."""
    problems = []
    before: tuple[object, set[object]] | None = None
    for e in history:
        if e[0] != "committed":
            continue
        members, committed = e[1], {c[0] for c in e[2]}  # type: ignore[attr-defined]
        if before is not None and before[0] and members:
            for partition in sorted(before[1] - committed):  # type: ignore[type-var]
                problems.append(f"partition {partition}: committed offset gone, group live")
        before = (members, committed)
    return problems


def committed_offsets_carry_epochs(history: History) -> list[str]:
    """KIP-320: a committed offset past a partition's start carries the leader epoch of
    the record before it, so a consumer resuming from it can detect a truncation."""
    missing = {
        (c[0], c[1])
        for e in history
        if e[0] == "committed"
        for c in e[2]  # type: ignore[attr-defined]
        if c[1] > 0 and c[2] is None
    }
    return [f"partition {p}: offset {o} committed without an epoch" for p, o in sorted(missing)]


def _violations(name: str) -> Callable[[History], list[str]]:
    def judge(history: History) -> list[str]:
        return [f"{e[2]} (at {e[3]}s)" for e in history if e[0] == "violated" and e[1] == name]

    judge.__doc__ = f"Snapshots that broke {name} (sim/isr.py)."
    return judge


def quarantine_complete(
    removed: Sequence[tuple[str, bytes]], quarantined: Mapping[str, Sequence[bytes]]
) -> list[str]:
    """Every record a broker removed from a segment (a truncation, a deleted segment)
    is in that partition's quarantine: truncation keeps aside, never destroys.
    ``removed``: (segment path, bytes); ``quarantined``: partition folder -> the bytes
    of each of its quarantine files."""
    kept: dict[str, set[tuple[int, bytes | None]]] = {}
    problems = []
    for path, data in removed:
        folder = posixpath.dirname(path)
        if folder not in kept:
            kept[folder] = {r for q in quarantined.get(folder, ()) for r in _records(q)}
        for offset, value in _records(data):
            if (offset, value) not in kept[folder]:
                problems.append(f"{folder}: offset {offset} ({value!r}) removed, not kept")
    return problems


def _records(data: bytes) -> Iterator[tuple[int, bytes | None]]:
    """(offset, value) of each record in the whole valid batches at the start of
    ``data`` (a torn batch, or what follows one, is no record)."""
    position = 0
    while position < len(data):
        try:
            header = read_header(data, position)
            validate_batch(data, position)
        except KafkaError:
            return
        batch = data[position : position + header.size]
        if not header.is_control:
            yield from ((r.offset, r.value) for r in iter_records(batch))
        position += header.size


def _below(offset: object, divergence: object) -> bool:
    return divergence is not None and offset < divergence  # type: ignore[operator]


CHECKERS: dict[str, Callable[[History], list[str]]] = {
    "lost-write": lost_write,
    "inconsistent-offsets": inconsistent_offsets,
    "poll-skip-or-rewind": poll_skip_and_rewind,
    "ListOffsetsMonotonic": list_offsets_monotonic,
    "StaleMetadataNeverUsed": stale_metadata_never_used,
    "OffsetsOfLiveGroupsKept": offsets_of_live_groups_kept,
    "CommittedOffsetsCarryEpochs": committed_offsets_carry_epochs,
    **{name: _violations(name) for name in SNAPSHOT_INVARIANTS},
}


def check(history: History) -> dict[str, list[str]]:
    """Every checker's findings, by name (an empty list: it held)."""
    return {name: checker(history) for name, checker in CHECKERS.items()}
