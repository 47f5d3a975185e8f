"""The streaming source: ``spark.readStream.format("epochlog")``.

Planning (driver): ``latestOffset(start, limit)`` validates every start position against
the current leader (OffsetsForLeaderEpoch) and the log start, applies ``onTruncation``
(see ``epochlog.spark.offsets`` for the offset JSON and the decisions), then picks end
offsets: the high watermark, capped by ``maxOffsetsPerTrigger`` (``ReadMaxRows``) and,
under ``Trigger.AvailableNow``, by the offsets seen when the query began. Every end
position carries the leader epoch and timestamp of the record before it, read from the
log, so the next batch can validate it (and ``closest`` can place it by time when a
divergence is unknown). ``partitions(start, end)`` uses only the two offsets, so a
batch replayed from the checkpoint reads the same ranges. ``commit``/``stop`` hold no
state that correctness needs.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from epochlog.client import TopicPartition
from epochlog.seams.real import real_seams
from epochlog.spark.offsets import (
    UNKNOWN_EPOCH,
    Position,
    SourceOffset,
    limit_ends,
    plan_starts,
)
from epochlog.spark.options import EARLIEST, LATEST, SourceOptions

if TYPE_CHECKING:
    import pyarrow as pa

    from epochlog.spark.leader_view import ClusterSnapshot, LeaderView
    from epochlog.spark.partition_reader import EpochlogInputPartition

# Spark imports this module in several short-lived Python processes per query (the one
# that pickles the reader, the one answering offset calls, the read workers): each
# imports only what its calls need (the cluster view, the reading code) on first use.

log = logging.getLogger("epochlog.spark")


def split_ranges(
    ranges: dict[TopicPartition, tuple[Position, int]], min_partitions: int | None
) -> list[tuple[TopicPartition, Position, int]]:
    """Ranges with records, cut into at least ``min_partitions`` pieces in proportion to
    their sizes (Spark's Kafka source does the same) so that every core reads. Only the
    first piece of a range carries the start epoch that validates it."""
    sized = [(tp, start, until) for tp, (start, until) in sorted(ranges.items())]
    sized = [(tp, start, until) for tp, start, until in sized if until > start.offset]
    total = sum(until - start.offset for _, start, until in sized)
    if not min_partitions or len(sized) >= min_partitions or total == 0:
        return sized
    out = []
    for tp, start, until in sized:
        size = until - start.offset
        pieces = max(1, min(size, -(-size * min_partitions // total)))
        cuts = [start.offset + size * i // pieces for i in range(pieces)] + [until]
        for i in range(pieces):
            begin = start if i == 0 else Position(cuts[i])
            out.append((tp, begin, cuts[i + 1]))
    return out


def input_partitions(
    options: SourceOptions,
    ranges: dict[TopicPartition, tuple[Position, int]],
    until_epochs: dict[TopicPartition, int] | None = None,
) -> list[EpochlogInputPartition]:
    """One Spark task per range with records (see ``split_ranges``). ``until_epochs``:
    the leader epoch of the record before each planned end, when the plan knows it."""
    from epochlog.spark.partition_reader import EpochlogInputPartition

    config = options.consumer_config()
    epochs = until_epochs or {}
    return [
        EpochlogInputPartition(
            tp.topic,
            tp.partition,
            start.offset,
            start.epoch,
            until,
            config,
            options.include_headers,
            options.poll_timeout_ms,
            options.on_truncation,
            epochs.get(tp, UNKNOWN_EPOCH),
        )
        for tp, start, until in split_ranges(ranges, options.min_partitions)
    ]


def initial_positions(
    options: SourceOptions, view: LeaderView, snap: ClusterSnapshot
) -> dict[TopicPartition, Position]:
    """``startingOffsets`` / ``startingOffsetsByTimestamp`` made concrete."""
    spec = options.starting
    wanted: dict[TopicPartition, int] = {}
    positions: dict[TopicPartition, Position] = {}
    for tp, v in snap.partitions.items():
        offset, epoch = spec.offsets.get((tp.topic, tp.partition), (spec.default, UNKNOWN_EPOCH))
        if spec.timestamps:
            ts = spec.timestamps.get((tp.topic, tp.partition))
            if ts is None:
                offset = spec.default
            else:
                wanted[tp] = ts
                continue
        if offset == EARLIEST:
            positions[tp] = Position(v.log_start)
        elif offset == LATEST:
            positions[tp] = Position(v.high_watermark)
        else:
            positions[tp] = Position(offset, epoch)
    if wanted:
        for tp, offset in view.offsets_for_times(wanted).items():
            positions[tp] = Position(offset)
    # Validate later batches: the epoch of the record before each chosen position.
    unknown = {
        tp: p.offset
        for tp, p in positions.items()
        if p.epoch == UNKNOWN_EPOCH and p.offset > snap.partitions[tp].log_start
    }
    for tp, (epoch, timestamp) in view.records_before(unknown).items():
        positions[tp] = Position(positions[tp].offset, epoch, timestamp)
    return positions


class EpochlogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._view_made: LeaderView | None = None
        self._target: dict[TopicPartition, int] | None = None
        # Spark asks for the initial offset more than once in a query's first batch;
        # every answer must be the same (a second look could see a moved "latest").
        self._initial: dict | None = None

    @property
    def _view(self) -> LeaderView:
        """The cluster view, made on the first driver call (not in processes that only
        pickle the reader or read partitions)."""
        if self._view_made is None:
            from epochlog.spark.leader_view import LeaderView

            self._view_made = LeaderView(self.options, real_seams())
        return self._view_made

    # -- offsets ---------------------------------------------------------------------

    def initialOffset(self) -> dict:
        if self._initial is not None:
            return self._initial
        snap = self._view.snapshot({})
        if not snap.partitions:
            raise ValueError("epochlog source: no partition matches the subscription")
        offset = SourceOffset(
            topic_ids=dict(snap.topic_ids),
            positions=initial_positions(self.options, self._view, snap),
        )
        log.info("epochlog source: initial offset %s", json.dumps(offset.to_json()))
        self._initial = offset.to_json()
        return self._initial

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self.options.max_offsets_per_trigger
        return ReadAllAvailable() if limit is None else ReadMaxRows(limit)

    def prepareForTriggerAvailableNow(self) -> None:
        """Read no further than what exists now: the high watermarks at this moment."""
        snap = self._view.snapshot({})
        self._target = {tp: v.high_watermark for tp, v in snap.partitions.items()}

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        previous = SourceOffset.from_json(start)
        snap = self._view.snapshot({tp: p.epoch for tp, p in previous.positions.items()})
        starts, moved, events = plan_starts(
            previous,
            snap,
            self.options.on_truncation,
            lambda tp, ts: self._view.offsets_for_times({tp: ts})[tp],
        )
        available = {tp: v.high_watermark for tp, v in snap.partitions.items()}
        if self._target is not None:
            available = {
                tp: max(starts[tp].offset, min(end, self._target.get(tp, starts[tp].offset)))
                for tp, end in available.items()
            }
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        ends = limit_ends(starts, available, max_rows)
        if not events and all(ends[tp] == starts[tp].offset for tp in ends):
            return start
        grown = {tp: end for tp, end in ends.items() if end > starts[tp].offset}
        before = self._view.records_before(grown)
        positions = dict(previous.positions)
        for tp, end in ends.items():
            positions[tp] = Position(end, *before[tp]) if tp in grown else starts[tp]
        end_offset = SourceOffset(
            topic_ids={**previous.topic_ids, **snap.topic_ids},
            positions=positions,
            starts=moved,
            events=events,
        )
        return end_offset.to_json()

    def reportLatestOffset(self) -> dict | None:
        return None

    # -- planning and reading --------------------------------------------------------

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        previous = SourceOffset.from_json(start)
        current = SourceOffset.from_json(end)
        ranges = {}
        for tp, until in current.positions.items():
            begin = current.batch_start(tp, previous)
            if begin is not None:
                ranges[tp] = (begin, until.offset)
        until_epochs = {tp: p.epoch for tp, p in current.positions.items()}
        return input_partitions(self.options, ranges, until_epochs)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        from epochlog.spark.partition_reader import EpochlogInputPartition, read_partition

        if not isinstance(partition, EpochlogInputPartition):
            return iter(())  # Spark's placeholder when there is nothing to read
        return read_partition(partition)

    def commit(self, end: dict) -> None:
        """Nothing to do: the checkpoint holds all the source needs."""

    def stop(self) -> None:
        """Close the cluster view's connection (nothing else needs it; Spark may not
        call this, and the process ends with the query anyway)."""
        if self._view_made is not None:
            self._view_made.close()
