"""What a Spark task runs: read one partition's planned offset range ``[start, until)``
with the epochlog client and yield Arrow record batches.

``read()`` runs in a Python worker on a pickled copy of the reader: everything it needs
(client settings, the range, the epoch to validate the start with) travels in the
``EpochlogInputPartition``. The start is sought with its epoch and
``auto.offset.reset=none``, so a truncation between planning and reading fails the
task (LogTruncationError) instead of reading other records than those planned."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from epochlog.client import Consumer, TopicPartition
from epochlog.spark.columns import arrow_schema, conform


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

    def __post_init__(self) -> None:
        InputPartition.__init__(self, (self.topic, self.partition, self.start, self.until))


def _before(batch: pa.RecordBatch, until: int) -> pa.RecordBatch:
    """The rows of one partition's batch (offsets ascending) below ``until``."""
    offsets = batch.column(batch.schema.get_field_index("offset")).to_numpy()
    return batch.slice(0, int(np.searchsorted(offsets, until, side="left")))


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
            batch = _before(consumer.poll_arrow(step_s), part.until)
            position = consumer.position(tp)
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
