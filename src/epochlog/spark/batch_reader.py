"""The batch source: ``spark.read.format("epochlog")`` over ``startingOffsets`` (default
earliest) to ``endingOffsets`` (default latest), or by timestamp. Ranges are fixed on
the driver when the read is planned; a start below the log start (records deleted by
retention) is reported, and stops the read with ``onTruncation=fail``."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

from epochlog.client import TopicPartition
from epochlog.seams.real import real_seams
from epochlog.spark.leader_view import LeaderView
from epochlog.spark.offsets import DataLossError, Position
from epochlog.spark.options import EARLIEST, LATEST, SourceOptions, StartSpec
from epochlog.spark.partition_reader import EpochlogInputPartition, read_partition
from epochlog.spark.stream_reader import input_partitions

log = logging.getLogger("epochlog.spark")


def _resolve(
    spec: StartSpec, view: LeaderView, bounds: dict[TopicPartition, tuple[int, int]]
) -> dict[TopicPartition, int]:
    out: dict[TopicPartition, int] = {}
    wanted: dict[TopicPartition, int] = {}
    for tp, (low, high) in bounds.items():
        if spec.timestamps and (tp.topic, tp.partition) in spec.timestamps:
            wanted[tp] = spec.timestamps[(tp.topic, tp.partition)]
            continue
        offset, _ = spec.offsets.get((tp.topic, tp.partition), (spec.default, -1))
        out[tp] = low if offset == EARLIEST else high if offset == LATEST else offset
    if wanted:
        out.update(view.offsets_for_times(wanted))
    return out


class EpochlogBatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        view = LeaderView(self.options, real_seams())
        try:
            snap = view.snapshot({})
            bounds = {tp: (v.log_start, v.high_watermark) for tp, v in snap.partitions.items()}
            starts = _resolve(self.options.starting, view, bounds)
            ends = _resolve(self.options.ending, view, bounds)
        finally:
            view.close()
        ranges: dict[TopicPartition, tuple[Position, int]] = {}
        lost = []
        for tp, (low, high) in sorted(bounds.items()):
            start, end = starts[tp], min(ends[tp], high)
            if start > end:
                raise ValueError(
                    f"epochlog source: {tp}: startingOffsets {start} is after endingOffsets {end}"
                )
            if start < low:
                lost.append(
                    {
                        "event": "retention",
                        "topic": tp.topic,
                        "partition": tp.partition,
                        "lostFrom": start,
                        "lostUntil": min(low, end),
                        "message": f"{tp}: offsets {start}..{min(low, end) - 1} were "
                        f"deleted by retention; reading from offset {low}",
                    }
                )
                start = min(low, end)
            ranges[tp] = (Position(start), end)
        if lost and self.options.on_truncation == "fail":
            raise DataLossError(lost)
        for e in lost:
            log.warning("epochlog source: %s", e["message"])
        return input_partitions(self.options, ranges)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, EpochlogInputPartition):
            return iter(())  # Spark's placeholder when there is nothing to read
        return read_partition(partition)
