"""Spark reading epochlog, as a ratio to Spark reading the same rows from parquet.

One broker, one topic holding --records records of 100-byte values (produced once by
confluent-kafka). Each run times:

1. epochlog: ``spark.readStream.format("epochlog")`` with ``trigger(availableNow=True)``
   into Spark's ``noop`` sink, from ``earliest`` with a fresh checkpoint;
2. memory: the same query on ``bench/memory_source.py``, a Python source serving rows of
   the same shape from memory: what Spark's Python Data Source API costs by itself;
3. parquet: ``spark.read.parquet`` of the same rows (written once, in this run, from a
   batch read of the topic) into ``noop``.

All on the same ``local[2]`` session (``epochlog.spark.session.build_session``, as the
demo and tests run Spark), after one untimed run of each. Medians of --runs runs and
their ratio (target >= 0.5). ``--sink`` also times the epochlog sink writing the rows
to a second topic (at-least-once and exactly-once), beside ``bench/memory_sink.py``, a
Python sink that drops what it is given: what Spark's Python writer API costs by itself.

    python bench/spark_read.py [--records 1000000] [--runs 3] [--partitions 2] [--sink]
        [--option kafka.max.partition.fetch.bytes=8388608 ...]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import confluent_kafka as ck
from common import BrokerProcess, median
from memory_sink import MemorySink
from memory_source import MemorySource
from pyspark.cloudpickle import register_pickle_by_value
from pyspark.sql import DataFrame, SparkSession

from epochlog.spark.session import build_session

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from support.clients import create_topic  # noqa: E402

VALUE_BYTES = 100
# A hang guard for one streaming run, never a judgement of speed.
RUN_BOUND_S = 1800.0


def produce(bootstrap: str, topic: str, count: int) -> float:
    """``count`` records with 100-byte values, keyed so they spread over partitions."""
    producer = ck.Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    errors: list[object] = []

    def done(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(err)

    start = time.perf_counter()
    for i in range(count):
        value = (b"%010d" % i).ljust(VALUE_BYTES, b"v")
        while True:
            try:
                producer.produce(topic, value, key=b"%d" % i, on_delivery=done)
                break
            except BufferError:
                producer.poll(0.01)
    left = producer.flush(600)
    if left or errors:
        raise SystemExit(f"produce failed: {left} undelivered, errors {errors[:3]}")
    return count / (time.perf_counter() - start)


def stream_rate(spark: SparkSession, stream: DataFrame, base: Path) -> tuple[float, int, float]:
    """availableNow streaming read into noop: rows/s from start() to termination, rows,
    and rows/s within the micro-batches (triggerExecution: the query's start and stop
    left out)."""
    checkpoint = Path(tempfile.mkdtemp(dir=base, prefix="checkpoint-"))
    start = time.perf_counter()
    query = (
        stream.writeStream.format("noop")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    if not query.awaitTermination(RUN_BOUND_S):
        query.stop()
        raise SystemExit("the availableNow query did not finish")
    elapsed = time.perf_counter() - start
    if query.exception() is not None:
        raise SystemExit(f"query failed: {query.exception()}")
    rows = sum(p["numInputRows"] for p in query.recentProgress)
    in_triggers = sum(p["durationMs"].get("triggerExecution", 0) for p in query.recentProgress)
    return rows / elapsed, rows, rows / max(in_triggers / 1000, 1e-9)


def epochlog_stream(
    spark: SparkSession, bootstrap: str, topic: str, options: dict[str, str]
) -> DataFrame:
    return (
        spark.readStream.format("epochlog")
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .options(**options)
        .load()
    )


def memory_stream(spark: SparkSession, rows: int, partitions: int) -> DataFrame:
    return (
        spark.readStream.format(MemorySource.name())
        .option("rows", str(rows))
        .option("partitions", str(partitions))
        .load()
    )


def parquet_rate(spark: SparkSession, path: Path, rows: int) -> float:
    """spark.read.parquet of the same rows into noop: rows/s."""
    start = time.perf_counter()
    spark.read.parquet(str(path)).write.format("noop").mode("overwrite").save()
    return rows / (time.perf_counter() - start)


def sink_rate(
    spark: SparkSession, bootstrap: str, source: Path, topic: str, guarantee: str | None
) -> float:
    """The epochlog sink writing the parquet rows (key, value) to ``topic``, or with
    ``guarantee`` None the do-nothing Python sink taking them: rows/s."""
    df = spark.read.parquet(str(source)).select("key", "value")
    rows = df.count()
    if guarantee is None:
        writer = df.write.format(MemorySink.name())
    else:
        writer = (
            df.write.format("epochlog")
            .option("bootstrap.servers", bootstrap)
            .option("topic", topic)
            .option("deliveryGuarantee", guarantee)
        )
    start = time.perf_counter()
    writer.mode("append").save()
    return rows / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--sink", action="store_true", help="also time the epochlog sink")
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a source option for the streaming read, e.g. kafka.max.partition.fetch.bytes=8388608",
    )
    args = parser.parse_args()
    options = dict(o.split("=", 1) for o in args.option)

    with tempfile.TemporaryDirectory(prefix="epochlog-bench-spark-") as tmp:
        base = Path(tmp)
        broker = BrokerProcess(
            log_dir=base / "logs",
            output_dir=base,
            settings={"num.partitions": args.partitions, "auto.create.topics.enable": "false"},
        ).start()
        try:
            topic = "bench-spark-read"
            create_topic(broker.bootstrap, topic, args.partitions)
            produced = produce(broker.bootstrap, topic, args.records)
            print(f"produced {args.records:,} records of {VALUE_BYTES} B: {produced:,.0f} rec/s")
            spark = build_session("epochlog-bench-spark-read")
            try:
                parquet = base / "rows.parquet"
                (
                    spark.read.format("epochlog")
                    .option("bootstrap.servers", broker.bootstrap)
                    .option("subscribe", topic)
                    .option("startingOffsets", "earliest")
                    .load()
                    .write.parquet(str(parquet))
                )
                stored = spark.read.parquet(str(parquet)).count()
                assert stored == args.records, f"parquet holds {stored} rows"
                # Spark's workers cannot import bench/: the reference source travels
                # by value.
                register_pickle_by_value(sys.modules[MemorySource.__module__])
                register_pickle_by_value(sys.modules[MemorySink.__module__])
                spark.dataSource.register(MemorySource)
                spark.dataSource.register(MemorySink)
                readers = {
                    "epochlog": lambda: epochlog_stream(spark, broker.bootstrap, topic, options),
                    "memory": lambda: memory_stream(spark, args.records, args.partitions),
                }
                # One untimed run of each first: all then run on a JIT-compiled JVM
                # and warm Python workers.
                for make in readers.values():
                    stream_rate(spark, make(), base)
                parquet_rate(spark, parquet, stored)
                rates: dict[str, list[float]] = {"parquet": []}
                for run in range(args.runs):
                    line = []
                    for name, make in readers.items():
                        rate, rows, in_batch = stream_rate(spark, make(), base)
                        assert rows == args.records, f"{name} streamed {rows} rows"
                        rates.setdefault(name, []).append(rate)
                        rates.setdefault(f"{name} in batches", []).append(in_batch)
                        line.append(f"{name} {rate:>10,.0f} ({in_batch:,.0f} in batches)")
                    rates["parquet"].append(parquet_rate(spark, parquet, stored))
                    line.append(f"parquet {rates['parquet'][-1]:>10,.0f} rows/s")
                    print(f"run {run + 1}: " + "   ".join(line))
                mid = {name: median(values) for name, values in rates.items()}
                print(
                    f"medians over {args.runs} runs, rows/s: "
                    + ", ".join(f"{name} {value:,.0f}" for name, value in mid.items())
                )
                print(
                    f"epochlog / parquet: {mid['epochlog'] / mid['parquet']:.2f} (target >= 0.5); "
                    f"within micro-batches {mid['epochlog in batches'] / mid['parquet']:.2f}"
                )
                print(
                    "Spark's Python source API with no Kafka at all (memory / parquet): "
                    f"{mid['memory'] / mid['parquet']:.2f}; epochlog / memory: "
                    f"{mid['epochlog'] / mid['memory']:.2f}, within micro-batches "
                    f"{mid['epochlog in batches'] / mid['memory in batches']:.2f}"
                )
                if args.sink:
                    create_topic(broker.bootstrap, "bench-spark-sink", args.partitions)
                    # None: the do-nothing Python sink.
                    guarantees: dict[str, str | None] = {
                        "nothing": None,
                        "at-least-once": "at-least-once",
                        "exactly-once": "exactly-once",
                    }
                    sinks: dict[str, list[float]] = {name: [] for name in guarantees}
                    # One untimed write of each first, as for the sources.
                    for guarantee in guarantees.values():
                        sink_rate(spark, broker.bootstrap, parquet, "bench-spark-sink", guarantee)
                    for run in range(args.runs):
                        for name, guarantee in guarantees.items():
                            sinks[name].append(
                                sink_rate(
                                    spark, broker.bootstrap, parquet, "bench-spark-sink", guarantee
                                )
                            )
                        print(
                            f"sink run {run + 1}: "
                            + "   ".join(f"{n} {r[-1]:,.0f}" for n, r in sinks.items())
                        )
                    mid = {name: median(rates) for name, rates in sinks.items()}
                    low = {name: min(rates) for name, rates in sinks.items()}
                    high = {name: max(rates) for name, rates in sinks.items()}
                    print(
                        "sink (df.write, local[2]), medians (min-max) rows/s: "
                        + ", ".join(
                            f"{n} {mid[n]:,.0f} ({low[n]:,.0f}-{high[n]:,.0f})" for n in mid
                        )
                    )
                    print(
                        "epochlog sink / do-nothing Python sink: at-least-once "
                        f"{mid['at-least-once'] / mid['nothing']:.2f}, exactly-once "
                        f"{mid['exactly-once'] / mid['nothing']:.2f} "
                        f"({mid['exactly-once'] / mid['at-least-once']:.2f} of at-least-once)"
                    )
            finally:
                spark.stop()
        finally:
            broker.close()


if __name__ == "__main__":
    main()
