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

import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from epochlog.client import Consumer, ConsumerRecord, TopicPartition
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


def _records_to_arrow(records: list[ConsumerRecord]) -> pa.RecordBatch:
    """TEMPORARY until Consumer.poll_arrow lands: client records as Arrow columns."""
    return pa.RecordBatch.from_pydict(
        {
            "key": pa.array([r.key for r in records], pa.binary()),
            "value": pa.array([r.value for r in records], pa.binary()),
            "topic": pa.array([r.topic for r in records], pa.string()),
            "partition": pa.array([r.partition for r in records], pa.int32()),
            "offset": pa.array([r.offset for r in records], pa.int64()),
            "timestamp": pa.array([r.timestamp for r in records], pa.timestamp("ms", tz="UTC")),
            "timestampType": pa.array([0] * len(records), pa.int32()),
            "leaderEpoch": pa.array(
                [-1 if r.leader_epoch is None else r.leader_epoch for r in records], pa.int32()
            ),
            "headers": pa.array(
                [[{"key": k, "value": v} for k, v in r.headers] for r in records],
                pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])),
            ),
        }
    )


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
            records = [r for r in consumer.poll(step_s) if r.offset < part.until]
            position = consumer.position(tp)
            if records:
                waited_ms = 0
                yield conform(_records_to_arrow(records), schema)
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
