"""The demo's PySpark pipelines: events from epochlog -> per-user counts and sums per
micro-batch -> parquet, with a checkpoint; and the same events, as read, into an
epochlog topic through the exactly-once sink (``start_sink_pipeline``).

Each micro-batch is written by ``foreachBatch`` into directories named after its batch
id, replacing whatever an earlier attempt of the same batch left there. The source
plans a replayed batch exactly as before (its end offsets, truncation decisions
included, are in the checkpoint), so a replay rewrites the same rows: the output holds
each event the query read exactly once."""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from epochlog.spark.session import build_session

EVENT_SCHEMA = "id string, user string, amount long, produced_at long"


def spark_session(app_name: str = "epochlog-demo") -> Any:
    """The demo's local session (quiet: the demo prints its own progress)."""
    return build_session(app_name, log_level="ERROR")


def event_rows(frame: Any) -> Any:
    """The source's rows (key, value, topic, partition, offset, leaderEpoch, ...) as
    events: the JSON value parsed, with where each event was read from."""
    from pyspark.sql import functions as F

    parsed = F.from_json(F.col("value").cast("string"), EVENT_SCHEMA)
    return frame.select(
        parsed.alias("event"), "topic", "partition", "offset", "leaderEpoch", "timestamp"
    ).select("event.*", "topic", "partition", "offset", "leaderEpoch", "timestamp")


def per_user(events: Any) -> Any:
    """The aggregation: how many events and how much per user in this micro-batch."""
    from pyspark.sql import functions as F

    return events.groupBy("user").agg(F.count("*").alias("events"), F.sum("amount").alias("amount"))


@dataclass
class PipelineStats:
    """What the micro-batches did, filled in on the driver by ``foreachBatch``."""

    batches: int = 0
    rows: int = 0
    last_batch_id: int = -1
    # partition -> the next offset after the highest one the pipeline has written
    read_up_to: dict[int, int] = field(default_factory=dict)
    # partition -> the leader epoch of the last record written
    read_epoch: dict[int, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, batch_id: int, rows: int, ends: dict[int, tuple[int, int]]) -> None:
        with self.lock:
            self.batches += 1
            self.rows += rows
            self.last_batch_id = batch_id
            for partition, (end, epoch) in ends.items():
                self.read_up_to[partition] = end
                self.read_epoch[partition] = epoch

    def epochs(self) -> dict[int, int]:
        with self.lock:
            return dict(self.read_epoch)

    def snapshot(self) -> tuple[int, int, dict[int, int]]:
        with self.lock:
            return self.batches, self.rows, dict(self.read_up_to)


def batch_writer(output: str, stats: PipelineStats) -> Any:
    """The ``foreachBatch`` function: events and per-user aggregates of one
    micro-batch, each into ``<output>/<table>/batch_id=N`` (overwritten on replay)."""
    from pyspark.sql import functions as F

    def write(frame: Any, batch_id: int) -> None:
        events = event_rows(frame).persist()
        try:
            per_partition = (
                events.groupBy("partition")
                .agg(
                    (F.max("offset") + 1).alias("end"),
                    F.count("*").alias("rows"),
                    F.max("leaderEpoch").alias("epoch"),
                )
                .collect()
            )
            ends = {int(r["partition"]): (int(r["end"]), int(r["epoch"])) for r in per_partition}
            rows = sum(int(r["rows"]) for r in per_partition)
            if rows:
                events.write.mode("overwrite").parquet(f"{output}/events/batch_id={batch_id}")
                per_user(events).write.mode("overwrite").parquet(
                    f"{output}/aggregates/batch_id={batch_id}"
                )
            stats.record(batch_id, rows, ends)
        finally:
            events.unpersist()

    return write


def client_options(client: Mapping[str, str]) -> dict[str, str]:
    """The client settings as the source's and sink's ``kafka.*`` options."""
    return {f"kafka.{key}": value for key, value in client.items()}


def start_pipeline(
    spark: Any,
    client: Mapping[str, str],
    topic: str,
    checkpoint: str,
    output: str,
    on_truncation: str,
    stats: PipelineStats,
    trigger_s: float = 1.0,
    max_offsets_per_trigger: int | None = None,
) -> Any:
    """Start the streaming query; it runs until stopped."""
    reader = (
        spark.readStream.format("epochlog")
        .options(**client_options(client))
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("onTruncation", on_truncation)
    )
    if max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
    return (
        reader.load()
        .writeStream.queryName("epochlog_demo")
        .foreachBatch(batch_writer(output, stats))
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime=f"{trigger_s} seconds")
        .start()
    )


def start_sink_pipeline(
    spark: Any,
    client: Mapping[str, str],
    topic: str,
    out_topic: str,
    checkpoint: str,
    on_truncation: str,
    trigger_s: float = 1.0,
) -> Any:
    """Every event the source reads, unchanged, into ``out_topic`` through the
    exactly-once sink: a restarted query (same checkpoint) or a retried task leaves no
    event twice for read_committed readers."""
    return (
        spark.readStream.format("epochlog")
        .options(**client_options(client))
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("onTruncation", on_truncation)
        .load()
        .select("key", "value")
        .writeStream.queryName("epochlog_demo_exactly_once")
        .format("epochlog")
        .options(**client_options(client))
        .option("topic", out_topic)
        .option("deliveryGuarantee", "exactly-once")
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime=f"{trigger_s} seconds")
        .start()
    )


class RestartableQuery:
    """A streaming query the demo stops and starts again from its checkpoint (what a
    crashed or redeployed job does), counting the restarts."""

    def __init__(self, start: Any) -> None:
        self._start = start
        self.query = start()
        self.restarts = 0

    def restart(self) -> None:
        if self.query.isActive:
            self.query.stop()
        self.query = self._start()
        self.restarts += 1

    def revive(self) -> None:
        """Start it again if it died (a task failed while brokers were down)."""
        if not self.query.isActive:
            self.restart()

    def stop(self) -> None:
        if self.query.isActive:
            self.query.stop()


def end_offsets(query: Any) -> list[dict[str, Any]]:
    """The source's end offset of every micro-batch still in the query's recent
    progress, as JSON (it carries the truncation decisions of that batch)."""
    found = []
    for progress in query.recentProgress:
        for source in progress.get("sources", []) if isinstance(progress, dict) else []:
            end = source.get("endOffset")
            if isinstance(end, str):
                try:
                    end = json.loads(end)
                except ValueError:
                    continue
            if end is not None:
                found.append({"batchId": progress.get("batchId"), "endOffset": end})
    return found
