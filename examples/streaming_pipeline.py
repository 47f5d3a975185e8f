"""A PySpark streaming pipeline on epochlog, to copy and adapt.

Reads JSON events ({"id", "user", "amount", ...}) from an epochlog topic, and for each
micro-batch writes the events and per-user counts and sums to parquet. It needs
pyspark, pandas and epochlog installed (``pip install -e '.[spark]'``) and a Java
runtime; no Spark Kafka jar: ``format("epochlog")`` is found by Spark on its own.

    python examples/streaming_pipeline.py --bootstrap 127.0.0.1:9092 --topic events \\
        --checkpoint var/pipeline/checkpoint --output var/pipeline/output \\
        --on-truncation closest

On a Spark standalone cluster (``--master spark://HOST:7077``), the checkpoint and the
output must be on storage the driver and every worker see (a shared volume, HDFS, S3):
the executors write the parquet files, the driver the checkpoint.

Exactly once: Spark replays an unfinished micro-batch after a crash from the
checkpoint, and the epochlog source plans the replay exactly as before (its end
offsets, with any truncation decision, are in the checkpoint). Each batch is written
into ``<output>/<table>/batch_id=N`` with mode overwrite, so a replay replaces what a
failed attempt left: every event read is in the output once.

``--on-truncation`` is the source's ``onTruncation`` option, for when records the query
already read are removed by an unclean leader election (or deleted by retention before
they were read):

- ``fail`` (the source's default): the query stops with an error naming each
  partition and the exact lost offsets; restart it with another policy to go on;
- ``closest`` and ``earliest``: go on from the divergence offset, reading what now
  stands at the lost offsets, so no surviving record is skipped (when the divergence
  is unknown, ``earliest`` goes to the log start, ``closest`` to the log end);
- ``latest``: the same when the divergence is known, else the log end.

Every decision is logged by the source and recorded in the micro-batch's end offset
(``events`` in ``<checkpoint>/offsets/N``); this script prints them as they happen.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from epochlog.spark.session import build_session

EVENT_SCHEMA = "id string, user string, amount long, produced_at long"


def events_of(frame: DataFrame) -> DataFrame:
    """Parse the record values; keep where each event was read from."""
    parsed = F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("event")
    return frame.select(parsed, "partition", "offset", "leaderEpoch", "timestamp").select(
        "event.*", "partition", "offset", "leaderEpoch", "timestamp"
    )


def write_batch(output: str) -> Callable[[DataFrame, int], None]:
    """The foreachBatch function: one directory per batch id, replaced on replay."""

    def write(frame: DataFrame, batch_id: int) -> None:
        events = events_of(frame).persist()
        try:
            if events.isEmpty():
                return
            events.write.mode("overwrite").parquet(f"{output}/events/batch_id={batch_id}")
            per_user = events.groupBy("user").agg(
                F.count("*").alias("events"), F.sum("amount").alias("amount")
            )
            per_user.write.mode("overwrite").parquet(f"{output}/aggregates/batch_id={batch_id}")
        finally:
            events.unpersist()

    return write


def truncation_events(progress: object) -> list[dict]:
    """The source's decisions recorded in a micro-batch's end offset."""
    text = getattr(progress, "json", None)
    data = json.loads(text) if isinstance(text, str) else progress
    found = []
    for source in (data or {}).get("sources", []):
        end = source.get("endOffset")
        end = json.loads(end) if isinstance(end, str) else end
        if isinstance(end, dict):
            found += [e for e in end.get("events", []) if e.get("event") != "newPartition"]
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092", help="bootstrap.servers")
    parser.add_argument("--topic", default="events")
    parser.add_argument("--checkpoint", default="var/pipeline/checkpoint")
    parser.add_argument("--output", default="var/pipeline/output")
    parser.add_argument(
        "--on-truncation", choices=["fail", "earliest", "latest", "closest"], default="closest"
    )
    parser.add_argument(
        "--master",
        default="local[2]",
        help="Spark master: local[N], or a standalone cluster's spark://HOST:7077",
    )
    parser.add_argument("--trigger-seconds", type=float, default=2.0)
    parser.add_argument("--max-offsets-per-trigger", type=int, default=None)
    parser.add_argument(
        "--available-now", action="store_true", help="read what is there now, then stop"
    )
    args = parser.parse_args()

    # Spark's Python workers must import epochlog: build_session runs them on this
    # interpreter, through a launcher that imports the installed PySpark (see
    # epochlog.spark.session). On a cluster, every worker host needs epochlog installed.
    spark = build_session("epochlog-pipeline", master=args.master)

    reader = (
        spark.readStream.format("epochlog")
        .option("bootstrap.servers", args.bootstrap)
        .option("subscribe", args.topic)
        .option("startingOffsets", "earliest")
        .option("onTruncation", args.on_truncation)
    )
    if args.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(args.max_offsets_per_trigger))
    writer = (
        reader.load()
        .writeStream.foreachBatch(write_batch(args.output))
        .option("checkpointLocation", args.checkpoint)
    )
    if args.available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{args.trigger_seconds} seconds")
    query = writer.start()

    seen_batch = -1

    def report() -> None:
        """Print each finished micro-batch once, with the source's decisions in it."""
        nonlocal seen_batch
        for progress in query.recentProgress:
            if progress["batchId"] <= seen_batch:
                continue
            seen_batch = progress["batchId"]
            print(f"batch {seen_batch}: {progress['numInputRows']} rows", flush=True)
            for event in truncation_events(progress):
                print(f"  source: {event.get('message')}", flush=True)

    try:
        while query.isActive:
            report()
            time.sleep(1)
        report()
        query.awaitTermination()
    except KeyboardInterrupt:
        query.stop()
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
