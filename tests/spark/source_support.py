"""Helpers of the source tests: produce known records with epochlog's own producer and
run availableNow queries into an in-memory table."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from epochlog.client import Producer

# A hang guard on one query; never a judgement of speed.
QUERY_BOUND_S = 300


def produce(
    bootstrap: str,
    topic: str,
    values: list[bytes],
    partition: int | None = 0,
    headers: list[tuple[str, bytes | None]] | None = None,
    keys: list[bytes] | None = None,
    timestamps: list[int] | None = None,
) -> list[tuple[int, int]]:
    """Produce with acks=all and return each record's (partition, offset)."""
    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 5}) as producer:
        futures = [
            producer.send(
                topic,
                value=v,
                key=None if keys is None else keys[i],
                partition=partition,
                headers=headers,
                timestamp=None if timestamps is None else timestamps[i],
            )
            for i, v in enumerate(values)
        ]
        producer.flush(60)
        metas = [f.result(60) for f in futures]
    return [(m.partition, m.offset) for m in metas]


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def stream(spark: SparkSession, bootstrap: str, **options: Any) -> DataFrame:
    reader = spark.readStream.format("epochlog").option("bootstrap.servers", bootstrap)
    for k, v in options.items():
        reader = reader.option(k, str(v))
    return reader.load()


def start_available_now(df: DataFrame, checkpoint: Path, out: Path) -> StreamingQuery:
    """Start one availableNow run into parquet files under ``out`` (a sink that, unlike
    the memory sink, restarts from its checkpoint)."""
    return (
        df.writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )


def finish(query: StreamingQuery) -> Exception | None:
    """Wait for a query to end (hang guard); its error, if it failed."""
    try:
        query.awaitTermination(QUERY_BOUND_S)
    except Exception as exc:  # the query's own failure, raised again here
        return exc
    assert not query.isActive, f"query {query.id} did not finish within {QUERY_BOUND_S} s"
    return query.exception()


def run_available_now(df: DataFrame, checkpoint: Path, out: Path) -> DataFrame:
    """One availableNow run that must succeed; returns everything written to ``out``."""
    error = finish(start_available_now(df, checkpoint, out))
    assert error is None, f"query into {out} failed: {error}"
    return read_output(df, out)


def read_output(df: DataFrame, out: Path) -> DataFrame:
    return df.sparkSession.read.schema(df.schema).parquet(str(out))


def offset_log(checkpoint: Path) -> list[dict[str, Any]]:
    """The source's end offset of every planned batch, from the checkpoint."""
    out: list[dict[str, Any]] = []
    if not (checkpoint / "offsets").exists():
        return out
    files = sorted(
        (p for p in (checkpoint / "offsets").iterdir() if p.name.isdigit()),
        key=lambda p: int(p.name),
    )
    for path in files:
        lines = path.read_text().splitlines()
        out.append(json.loads(lines[2]))
    return out


def committed(checkpoint: Path) -> int:
    """How many batches the query committed (its sink wrote them)."""
    commits = checkpoint / "commits"
    return sum(1 for p in commits.iterdir() if p.name.isdigit()) if commits.exists() else 0
