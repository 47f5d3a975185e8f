"""What a Spark task runs: read one partition's planned offset range ``[start, until)``
with the epochlog client and yield Arrow record batches.

``read()`` runs in a Python worker on a pickled copy of the reader: everything it needs
(client settings, the range, the epoch to validate the start with) travels in the
``EpochlogInputPartition``. The start is sought with its epoch, so a truncation
between planning and reading (or while a planned batch is replayed) is seen here too:
with ``onTruncation=fail`` the task fails (LogTruncationError names the partition and
the divergence offset); otherwise the client's ``earliest`` policy moves the position
(logged by the client) and only rows inside the planned range are yielded."""

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
    on_truncation: str = "fail"

    def __post_init__(self) -> None:
        InputPartition.__init__(self, (self.topic, self.partition, self.start, self.until))


def _within(batch: pa.RecordBatch, start: int, until: int) -> pa.RecordBatch:
    """The rows of one partition's batch (offsets ascending) in ``[start, until)``."""
    offsets = batch.column(batch.schema.get_field_index("offset")).to_numpy()
    first = int(np.searchsorted(offsets, start, side="left"))
    return batch.slice(first, int(np.searchsorted(offsets, until, side="left")) - first)


def read_partition(part: EpochlogInputPartition) -> Iterator[pa.RecordBatch]:
    """Every record of ``[start, until)``, in offset order, sliced at ``until``."""
    if part.until <= part.start:
        return
    schema = arrow_schema(part.include_headers)
    tp = TopicPartition(part.topic, part.partition)
    reset = "none" if part.on_truncation == "fail" else "earliest"
    config = {**part.config, "auto.offset.reset": reset}
    with Consumer(config) as consumer:
        consumer.assign([tp])
        epoch = part.start_epoch if part.start_epoch >= 0 else None
        consumer.seek(tp, part.start, epoch)
        waited_ms = 0
        step_s = 0.5
        while True:
            batch = _within(consumer.poll_arrow(step_s), part.start, part.until)
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
