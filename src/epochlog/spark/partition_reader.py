"""What a Spark task runs: read one partition's planned offset range ``[start, until)``
with the epochlog client and yield Arrow record batches.

``read()`` runs in a Python worker on a pickled copy of the reader: everything it needs
(client settings, the range, the epoch to validate the start with) travels in the
``EpochlogInputPartition``. The start is sought with its epoch and the client runs with
``auto.offset.reset=none``, so a truncation between planning and reading (or before a
planned batch is replayed) is seen here too. With ``onTruncation=fail`` the task fails
(LogTruncationError names the partition and the divergence offset). Otherwise the task
yields only the rows before the divergence, which old and new log share, and stops:
the next plan validates this batch's end offset, finds the same divergence and applies
the policy once, with the range reported there. Reading the new leader's records inside
this planned range would hand them out twice when that decision moves back. A plan
made before an election but read after it may also start below the divergence: then the
first record with a leader epoch above the plan's end epoch marks where the new leader's
log departs from the plan, and the task stops (or fails) there the same way."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from epochlog.client import Consumer, LogTruncationError, TopicPartition
from epochlog.spark.columns import arrow_schema, conform, valid, values

log = logging.getLogger("epochlog.spark.read")


@dataclass
class EpochlogInputPartition(InputPartition):
    """One topic-partition's range for one batch, with the client settings."""

    topic: str
    partition: int
    start: int
    start_epoch: int
    until: int
    config: dict[str, Any]
    include_headers: bool
    poll_timeout_ms: int
    on_truncation: str = "fail"
    # Leader epoch of the record before ``until`` when planned (-1: unknown). No record
    # of the planned range has a higher one: meeting one means a new leader rewrote it.
    until_epoch: int = -1

    def __post_init__(self) -> None:
        InputPartition.__init__(self, (self.topic, self.partition, self.start, self.until))


def _within(batch: pa.RecordBatch, start: int, until: int) -> pa.RecordBatch:
    """The rows of one partition's batch (offsets ascending) in ``[start, until)``."""
    offsets = values(batch.column(batch.schema.get_field_index("offset")), np.int64)
    first = int(np.searchsorted(offsets, start, side="left"))
    return batch.slice(first, int(np.searchsorted(offsets, until, side="left")) - first)


class PlannedRangeRewrittenError(RuntimeError):
    """Records of a planned range were replaced by a new leader after the plan."""


def _rewritten_from(batch: pa.RecordBatch, until_epoch: int) -> int | None:
    """Index of the first row whose leader epoch is newer than the plan's end, if any."""
    if until_epoch < 0 or batch.num_rows == 0:
        return None
    epochs = batch.column(batch.schema.get_field_index("leaderEpoch"))
    newer = np.flatnonzero((values(epochs, np.int32) > until_epoch) & valid(epochs))
    return int(newer[0]) if newer.size else None


def read_partition(part: EpochlogInputPartition) -> Iterator[pa.RecordBatch]:
    """Every record of ``[start, until)``, in offset order, sliced at ``until``."""
    if part.until <= part.start:
        return
    schema = arrow_schema(part.include_headers)
    tp = TopicPartition(part.topic, part.partition)
    config = {**part.config, "auto.offset.reset": "none"}
    with Consumer(config) as consumer:
        consumer.assign([tp])
        epoch = part.start_epoch if part.start_epoch >= 0 else None
        consumer.seek(tp, part.start, epoch)
        waited_ms = 0
        step_s = 0.5
        while True:
            try:
                batch = _within(consumer.poll_arrow(step_s), part.start, part.until)
            except LogTruncationError as exc:
                if part.on_truncation == "fail":
                    raise
                log.warning("%s; this batch stops there, the next plan decides", exc)
                return
            position = consumer.position(tp)
            rewritten = _rewritten_from(batch, part.until_epoch)
            if rewritten is not None:
                if rewritten:
                    yield conform(batch.slice(0, rewritten), schema)
                at = batch.column(batch.schema.get_field_index("offset"))[rewritten].as_py()
                message = (
                    f"{tp}: offsets {at}..{part.until - 1} planned for this batch were "
                    f"rewritten by a new leader (epoch above {part.until_epoch}) after planning"
                )
                if part.on_truncation == "fail":
                    raise PlannedRangeRewrittenError(message + " (onTruncation=fail)")
                log.warning("%s; this batch stops there, the next plan decides", message)
                return
            if batch.num_rows:
                waited_ms = 0
                yield conform(batch, schema)
            else:
                waited_ms += int(step_s * 1000)
            if position is not None and position.offset >= part.until:
                return
            if waited_ms > part.poll_timeout_ms:
                at = None if position is None else position.offset
                raise TimeoutError(
                    f"epochlog source: {tp} gave no records for {part.poll_timeout_ms} ms "
                    f"at offset {at}, planned to read up to {part.until}"
                )
