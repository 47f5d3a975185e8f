"""The pipeline that test_exactly_once_driver_kill.py and test_exactly_once_sink.py run
as its own Spark driver process: epochlog (the source) into parquet, or with
``--to-topic`` into an epochlog topic through the exactly-once sink, with a checkpoint,
availableNow, in small micro-batches.

With ``--hold-from-batch N`` the task of Spark partition 1 of every micro-batch from N
on stops before handing over its rows (after writing a marker file) and waits for a
gate file that the test never creates: the batch is then running, and other tasks may
already have written their parquet files, when the test SIGKILLs this process group.

With ``--fail-task-once N`` the task of Spark partition 0 of micro-batch N fails on its
first attempt (Spark retries it).

    python driver_kill_pipeline.py BOOTSTRAP TOPIC CHECKPOINT OUTPUT MARKERS
        [--max-offsets 4000] [--hold-from-batch N] [--fail-task-once N] [--to-topic OUT]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
from pyspark import TaskContext

from epochlog.spark.session import build_session, worker_python

# How long a held task waits for its gate before failing (the test kills it long before).
HOLD_BOUND_S = 600.0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("bootstrap")
    parser.add_argument("topic")
    parser.add_argument("checkpoint")
    parser.add_argument("output")
    parser.add_argument("markers")
    parser.add_argument("--max-offsets", type=int, default=4000)
    parser.add_argument("--hold-from-batch", type=int, default=-1)
    parser.add_argument("--fail-task-once", type=int, default=-1)
    parser.add_argument("--to-topic")
    args = parser.parse_args()
    os.environ["PYSPARK_PYTHON"] = os.environ["PYSPARK_DRIVER_PYTHON"] = worker_python()
    # Two attempts per task, so that an injected task failure is retried.
    spark = build_session("epochlog-driver-kill", master="local[2,2]")
    hold_from = args.hold_from_batch
    fail_once = args.fail_task_once
    markers = args.markers

    def hold(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        ctx = TaskContext.get()
        assert ctx is not None
        raw = ctx.getLocalProperty("streaming.sql.batchId")
        batch_id = int(raw) if raw is not None else -1
        if hold_from >= 0 and batch_id >= hold_from and ctx.partitionId() == 1:
            Path(markers, f"holding-batch-{batch_id}").write_text(str(os.getpid()))
            gate = Path(markers, "gate")
            deadline = time.monotonic() + HOLD_BOUND_S
            while not gate.exists():
                if time.monotonic() > deadline:
                    raise RuntimeError("held task was never killed")
                time.sleep(0.05)
        failed = Path(markers, "failed-once")
        if batch_id == fail_once and ctx.partitionId() == 0 and not failed.exists():
            failed.write_text(str(ctx.attemptNumber()))
            raise RuntimeError("injected task failure (first attempt)")
        yield from batches

    stream = (
        spark.readStream.format("epochlog")
        .option("bootstrap.servers", args.bootstrap)
        .option("subscribe", args.topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(args.max_offsets))
        .load()
        .selectExpr("cast(value as string) as value", "partition", "offset")
    )
    held = stream.mapInArrow(hold, stream.schema)
    if args.to_topic:
        writer = (
            held.selectExpr("value")
            .writeStream.format("epochlog")
            .option("bootstrap.servers", args.bootstrap)
            .option("topic", args.to_topic)
            .option("deliveryGuarantee", "exactly-once")
        )
    else:
        writer = held.writeStream.format("parquet").option("path", args.output)
    query = writer.option("checkpointLocation", args.checkpoint).trigger(availableNow=True).start()
    query.awaitTermination()
    progress = query.lastProgress
    print(f"driver finished; last batch {progress['batchId'] if progress else None}", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
