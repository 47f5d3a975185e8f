"""The source's offsets as Spark checkpoints them, and the decisions taken on truncation.

Offset JSON (what Spark writes to ``<checkpoint>/offsets/<batch>``)::

    {"topics": {"events": {"id": "<topic id>",
                           "partitions": {"0": {"offset": 120, "epoch": 3}}}},
     "starts": {"events": {"0": {"offset": 95, "epoch": 2}}},
     "events": [{"event": "truncation", "topic": "events", "partition": 0,
                 "lostFrom": 95, "lostUntil": 100, "policy": "earliest",
                 "resumeAt": 95, "message": "..."}]}

- ``topics``: per partition the next offset to read and the leader epoch of the record
  before it (-1 when unknown, e.g. at a log start), with the topic ID (KIP-232) so a
  deleted and re-created topic is noticed.
- ``starts`` (end offsets only): where the batch starts for partitions whose start is not
  the previous batch's end: a position moved by a decision below, or a partition that is
  new. ``partitions(start, end)`` reads ``starts`` first, so replaying a batch from the
  checkpoint plans exactly the same ranges without asking the cluster again.
- ``events`` (end offsets only): every automatic decision, also logged on the driver.

Decisions, taken when a micro-batch is planned (``plan_starts``):

- truncation: the position (offset, epoch) is checked with OffsetsForLeaderEpoch on the
  current leader (or, without an epoch, against the high watermark). Records
  ``[lostFrom, lostUntil)`` that the query had read no longer exist. ``onTruncation``:
  ``fail`` stops the query naming each partition and range; ``earliest``, ``latest``
  and ``closest`` follow the client's KIP-320 table: resume at the divergence offset
  when it is known (what now stands at those offsets is read), else ``earliest`` at
  the log start, ``latest`` at the log end, and ``closest`` at the first record at or
  after the timestamp of the last record read (kept in the checkpoint with each
  position), or at the log end when that time is unknown or no record is that late.
- retention: records ``[position, log start)`` deleted before they were read are
  reported as ``retention``; ``fail`` stops, otherwise reading resumes at the log start.
- a topic whose ID changed was re-created: ``topicRecreated``; ``fail`` stops,
  otherwise the new topic is read from its log start.
- a new partition (``newPartition``) is read from its log start.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from epochlog.client import TopicPartition
from epochlog.client.positions import ResetCause, ResetPolicy, Target, reset_plan
from epochlog.protocol.divergence import find_divergence

if TYPE_CHECKING:
    from epochlog.spark.leader_view import ClusterSnapshot

log = logging.getLogger("epochlog.spark")

UNKNOWN_EPOCH = -1
UNKNOWN_TIMESTAMP = -1
# The first offset at or after a time on a partition; the log end when none is that late.
OffsetForTime = Callable[[TopicPartition, int], int]


@dataclass(frozen=True)
class Position:
    """Next offset to read, and the leader epoch and timestamp of the record before it
    (the epoch validates the position; the time places ``closest`` when the divergence
    is unknown)."""

    offset: int
    epoch: int = UNKNOWN_EPOCH
    timestamp: int = UNKNOWN_TIMESTAMP

    def to_json(self) -> dict[str, int]:
        out = {"offset": self.offset, "epoch": self.epoch}
        if self.timestamp != UNKNOWN_TIMESTAMP:
            out["timestamp"] = self.timestamp
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Position:
        return cls(
            int(data["offset"]),
            int(data.get("epoch", UNKNOWN_EPOCH)),
            int(data.get("timestamp", UNKNOWN_TIMESTAMP)),
        )


@dataclass
class SourceOffset:
    topic_ids: dict[str, str] = field(default_factory=dict)
    positions: dict[TopicPartition, Position] = field(default_factory=dict)
    starts: dict[TopicPartition, Position] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """A dict of strings, ints and lists only: Spark json.dumps it and compares text."""
        topics: dict[str, Any] = {}
        for tp in sorted(self.positions):
            entry = topics.setdefault(
                tp.topic, {"id": self.topic_ids.get(tp.topic, ""), "partitions": {}}
            )
            entry["partitions"][str(tp.partition)] = self.positions[tp].to_json()
        out: dict[str, Any] = {"topics": topics}
        if self.starts:
            starts: dict[str, Any] = {}
            for tp in sorted(self.starts):
                starts.setdefault(tp.topic, {})[str(tp.partition)] = self.starts[tp].to_json()
            out["starts"] = starts
        if self.events:
            out["events"] = list(self.events)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SourceOffset:
        offset = cls()
        for topic, entry in data.get("topics", {}).items():
            offset.topic_ids[topic] = entry.get("id", "")
            for part, pos in entry.get("partitions", {}).items():
                offset.positions[TopicPartition(topic, int(part))] = Position.from_json(pos)
        for topic, parts in data.get("starts", {}).items():
            for part, pos in parts.items():
                offset.starts[TopicPartition(topic, int(part))] = Position.from_json(pos)
        offset.events = list(data.get("events", []))
        return offset

    def batch_start(self, tp: TopicPartition, previous: SourceOffset) -> Position | None:
        """Where the batch ending at ``self`` starts reading ``tp``."""
        if tp in self.starts:
            return self.starts[tp]
        return previous.positions.get(tp)


class DataLossError(RuntimeError):
    """Records the query had not yet read, or had read, are gone; onTruncation=fail."""

    def __init__(self, events: list[dict[str, Any]]) -> None:
        lines = "; ".join(e["message"] for e in events)
        super().__init__(
            f"epochlog source: data loss detected: {lines}. The query stops "
            "(onTruncation=fail); set onTruncation to earliest, latest or closest to go on."
        )
        self.events = events


def _range(lost_from: int | None, lost_until: int) -> str:
    if lost_from is None:
        return f"offsets below {lost_until} (divergence offset unknown)"
    return f"offsets {lost_from}..{lost_until - 1} ({lost_until - lost_from} records)"


def plan_starts(
    previous: SourceOffset,
    snap: ClusterSnapshot,
    policy: str,
    offset_for_time: OffsetForTime | None = None,
) -> tuple[dict[TopicPartition, Position], dict[TopicPartition, Position], list[dict[str, Any]]]:
    """Validate each position against the cluster and decide where the next batch starts.

    Returns (start of every partition read, the starts that differ from ``previous``,
    events). Raises DataLossError with every loss found when ``policy`` is ``fail``.
    ``offset_for_time`` is asked only for ``closest`` when a divergence is unknown.
    """
    starts: dict[TopicPartition, Position] = {}
    moved: dict[TopicPartition, Position] = {}
    events: list[dict[str, Any]] = []

    def event(kind: str, tp: TopicPartition, message: str, **extra: Any) -> None:
        text = f"{tp}: {message}"
        events.append(
            {"event": kind, "topic": tp.topic, "partition": tp.partition, **extra, "message": text}
        )

    for tp, view in sorted(snap.partitions.items()):
        pos = previous.positions.get(tp)
        old_id = previous.topic_ids.get(tp.topic)
        new_id = snap.topic_ids[tp.topic]
        if pos is None:
            pos = Position(view.log_start)
            event("newPartition", tp, f"new partition, read from offset {view.log_start}")
            moved[tp] = pos
        elif old_id and old_id != new_id:
            pos = Position(view.log_start)
            event(
                "topicRecreated",
                tp,
                f"topic re-created (topic id {old_id} is now {new_id}); the old topic's "
                f"records from offset {previous.positions[tp].offset} on were not read; "
                f"the new topic is read from offset {view.log_start}",
                policy=policy,
                resumeAt=view.log_start,
            )
            moved[tp] = pos
        else:
            pos = _check_truncation(tp, pos, view, snap, policy, event, moved, offset_for_time)
        if pos.offset < view.log_start:
            event(
                "retention",
                tp,
                f"{_range(pos.offset, view.log_start)} were deleted by retention before "
                f"they were read; reading resumes at offset {view.log_start}",
                lostFrom=pos.offset,
                lostUntil=view.log_start,
                policy=policy,
                resumeAt=view.log_start,
            )
            pos = Position(view.log_start)
            moved[tp] = pos
        starts[tp] = pos
    losses = [e for e in events if e["event"] != "newPartition"]
    if losses and policy == "fail":
        raise DataLossError(losses)
    for e in events:
        if e["event"] == "newPartition":
            log.info("epochlog source: %s", e["message"])
        else:
            log.warning("epochlog source: %s (onTruncation=%s)", e["message"], policy)
    return starts, moved, events


def _check_truncation(
    tp: TopicPartition,
    pos: Position,
    view: Any,
    snap: ClusterSnapshot,
    policy: str,
    event: Any,
    moved: dict[TopicPartition, Position],
    offset_for_time: OffsetForTime | None,
) -> Position:
    lost_from: int | None
    answer = snap.epoch_ends.get(tp)
    if pos.epoch >= 0 and answer is not None:
        found = find_divergence(pos.offset, pos.epoch, answer[0], answer[1])
        if not found.truncated:
            return pos
        lost_from = found.offset
        epoch_before = UNKNOWN_EPOCH if found.epoch is None else found.epoch
    elif pos.offset > view.high_watermark:
        lost_from, epoch_before = view.high_watermark, UNKNOWN_EPOCH
    else:
        return pos
    # The draft KIP's table, as the consumer applies it; "fail" plans as "latest" did
    # and then stops the query (``DataLossError``) once every event is recorded.
    plan = reset_plan(
        ResetPolicy.LATEST if policy == "fail" else ResetPolicy(policy),
        ResetCause.TRUNCATION_UNKNOWN if lost_from is None else ResetCause.TRUNCATION_KNOWN,
        divergence=lost_from,
        last_timestamp=pos.timestamp if offset_for_time is not None else None,
    )
    if plan.target is Target.DIVERGENCE:
        resume = Position(lost_from, epoch_before)
    elif plan.target is Target.LOG_START:
        resume = Position(view.log_start)
    elif plan.target is Target.TIMESTAMP and offset_for_time is not None:
        resume = Position(offset_for_time(tp, pos.timestamp))
    else:
        resume = Position(view.high_watermark)
    event(
        "truncation",
        tp,
        f"{_range(lost_from, pos.offset)} read by the query were removed by log "
        f"truncation (leader epoch {view.leader_epoch}); reading resumes at offset "
        f"{resume.offset}",
        lostFrom=-1 if lost_from is None else lost_from,
        lostUntil=pos.offset,
        policy=policy,
        resumeAt=resume.offset,
    )
    moved[tp] = resume
    return resume


def limit_ends(
    starts: Mapping[TopicPartition, Position],
    available: Mapping[TopicPartition, int],
    max_rows: int | None,
) -> dict[TopicPartition, int]:
    """End offsets: everything available, or ``max_rows`` offsets shared in proportion
    to what each partition has (Spark's Kafka source does the same), summing exactly."""
    sizes = {tp: max(0, available[tp] - starts[tp].offset) for tp in starts}
    total = sum(sizes.values())
    if max_rows is None or total <= max_rows:
        return {tp: starts[tp].offset + sizes[tp] for tp in starts}
    shares = {tp: max_rows * size // total for tp, size in sizes.items()}
    left = max_rows - sum(shares.values())
    for tp in sorted(sizes, key=lambda t: (-(max_rows * sizes[t] % total), t)):
        if left == 0:
            break
        if shares[tp] < sizes[tp]:
            shares[tp] += 1
            left -= 1
    return {tp: starts[tp].offset + shares[tp] for tp in starts}
