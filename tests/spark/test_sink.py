"""The epochlog sinks on a real broker: batch and streaming writes land in the log as
written (keys, values, topics, partitions, headers), and bad input is refused with an
error that says what is wrong."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    StringType,
    StructField,
    StructType,
)

from epochlog.client import Consumer, TopicPartition
from support.broker import BrokerProcess
from support.clients import create_topic

# A hang guard for reading back what a test wrote; never a judgement of speed.
READ_BOUND_S = 120.0


def read_topic(
    bootstrap: str, topic: str, partitions: int, count: int
) -> list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]]:
    """Every record of ``topic`` as (partition, key, value, headers), once ``count``
    are there (and one more poll shows no extra ones)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"})
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        got: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]] = []
        deadline = time.monotonic() + READ_BOUND_S
        while len(got) < count and time.monotonic() < deadline:
            for r in consumer.poll(1.0):
                got.append((r.partition, r.key, r.value, list(r.headers)))
        got += [(r.partition, r.key, r.value, list(r.headers)) for r in consumer.poll(0.5)]
        return got
    finally:
        consumer.close()


def sink(df_writer: object, broker: BrokerProcess) -> object:
    return df_writer.format("epochlog").option("bootstrap.servers", broker.bootstrap)  # type: ignore[attr-defined]


def test_batch_write_of_a_million_rows_reads_back_exactly(
    spark: SparkSession, spark_broker: BrokerProcess
) -> None:
    """1,000,000 rows through the sink, read back by the epochlog source (batch read):
    the same count, no value twice, and the same sum of value hashes."""
    topic = "sink-million"
    create_topic(spark_broker.bootstrap, topic, 2)
    rows = 1_000_000
    written = spark.range(0, rows, 1, 4).selectExpr(
        "cast(id as string) as key",
        "cast(concat('value-', cast(id as string), repeat('x', 80)) as binary) as value",
    )
    expected = written.selectExpr(
        "count(*) as n", "sum(cast(xxhash64(value) as decimal(38, 0))) as h"
    ).first()
    (
        sink(written.write, spark_broker)
        .option("topic", topic)
        .option("kafka.linger.ms", "20")
        .option("kafka.batch.size", "262144")
        .mode("append")
        .save()
    )
    read = (
        spark.read.format("epochlog")
        .option("bootstrap.servers", spark_broker.bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load()
    )
    got = read.selectExpr(
        "count(*) as n",
        "count(distinct value) as distinct_values",
        "sum(cast(xxhash64(value) as decimal(38, 0))) as h",
        "count(distinct partition) as partitions",
        "count_if(cast(value as string) like "
        "concat('value-', cast(key as string), 'x%')) as keys_match",
    ).first()
    assert got is not None and expected is not None
    assert got["n"] == rows == expected["n"]
    assert got["distinct_values"] == rows
    assert got["h"] == expected["h"]
    assert got["partitions"] == 2
    assert got["keys_match"] == rows


def test_topic_partition_and_headers_columns(
    spark: SparkSession, spark_broker: BrokerProcess
) -> None:
    """Each row goes to its own topic and partition, with its headers; string keys and
    values are written as their UTF-8 bytes."""
    create_topic(spark_broker.bootstrap, "sink-cols-a", 3)
    create_topic(spark_broker.bootstrap, "sink-cols-b", 1)
    header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
    schema = StructType(
        [
            StructField("topic", StringType()),
            StructField("partition", IntegerType()),
            StructField("key", StringType()),
            StructField("value", StringType()),
            StructField("headers", ArrayType(header)),
        ]
    )
    data = [
        ("sink-cols-a", 2, "k1", "v1", [("h", b"1"), ("h2", None)]),
        ("sink-cols-a", 0, None, "v2", []),
        ("sink-cols-b", None, "k3", "v3", None),
        ("sink-cols-a", 2, "k4", "é", [("ü", b"\x00\xff")]),
    ]
    df = spark.createDataFrame(data, schema).coalesce(1)
    sink(df.write, spark_broker).mode("append").save()

    a = read_topic(spark_broker.bootstrap, "sink-cols-a", 3, 3)
    b = read_topic(spark_broker.bootstrap, "sink-cols-b", 1, 1)
    assert sorted(a, key=lambda r: r[2] or b"") == [
        (2, b"k1", b"v1", [("h", b"1"), ("h2", None)]),
        (0, None, b"v2", []),
        (2, b"k4", "é".encode(), [("ü", b"\x00\xff")]),
    ]
    assert b == [(0, b"k3", b"v3", [])]


def test_topic_option_overrides_the_topic_column(
    spark: SparkSession, spark_broker: BrokerProcess
) -> None:
    """As in Spark's Kafka sink, the ``topic`` option wins over a ``topic`` column."""
    create_topic(spark_broker.bootstrap, "sink-override", 1)
    df = spark.createDataFrame([("elsewhere", b"a"), (None, b"b")], "topic string, value binary")
    sink(df.write, spark_broker).option("topic", "sink-override").mode("append").save()
    got = read_topic(spark_broker.bootstrap, "sink-override", 1, 2)
    assert sorted(r[2] for r in got) == [b"a", b"b"]


def test_streaming_sink_from_a_file_stream(
    spark: SparkSession, spark_broker: BrokerProcess, tmp_path: Path
) -> None:
    """A file stream into the sink with availableNow: every line once in the log (one
    clean run: at-least-once has nothing to repeat); a second run from the same
    checkpoint writes nothing again."""
    topic = "sink-stream"
    create_topic(spark_broker.bootstrap, topic, 2)
    src = tmp_path / "in"
    src.mkdir()
    expected = []
    for f in range(4):
        with (src / f"part-{f}.json").open("w") as out:
            for i in range(2500):
                n = f * 2500 + i
                out.write(json.dumps({"k": f"key-{n}", "v": f"value-{n}"}) + "\n")
                expected.append((f"key-{n}".encode(), f"value-{n}".encode()))
    stream = (
        spark.readStream.format("json")
        .schema("k string, v string")
        .option("maxFilesPerTrigger", 2)
        .load(str(src))
        .selectExpr("k as key", "v as value")
    )

    def run() -> None:
        query = (
            sink(stream.writeStream, spark_broker)
            .option("topic", topic)
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(READ_BOUND_S), "the availableNow query did not finish"
        assert query.exception() is None

    run()
    run()
    got = read_topic(spark_broker.bootstrap, topic, 2, len(expected))
    assert sorted((k, v) for _, k, v, _ in got) == sorted(expected)


def _error_of(action: object) -> str:
    with pytest.raises(Exception) as info:
        action()  # type: ignore[operator]
    return str(info.value)


def test_missing_topic_is_refused_before_any_task_runs(
    spark: SparkSession, spark_broker: BrokerProcess
) -> None:
    df = spark.createDataFrame([(b"a",)], "value binary")
    message = _error_of(lambda: sink(df.write, spark_broker).mode("append").save())
    assert "no topic column and no topic option" in message


def test_missing_topic_in_a_streaming_query_is_refused(
    spark: SparkSession, spark_broker: BrokerProcess, tmp_path: Path
) -> None:
    stream = spark.readStream.format("rate").load().selectExpr("cast(value as string) as value")

    def start() -> None:
        query = (
            sink(stream.writeStream, spark_broker)
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .start()
        )
        try:
            query.awaitTermination(READ_BOUND_S)
            # An error raised when the first batch is planned ends the query.
            raise AssertionError(f"query ran without a topic: {query.exception()}")
        finally:
            query.stop()

    message = _error_of(start)
    assert "no topic column and no topic option" in message


def test_null_topic_in_a_row_names_the_row(
    spark: SparkSession, spark_broker: BrokerProcess
) -> None:
    create_topic(spark_broker.bootstrap, "sink-null-topic", 1)
    df = spark.createDataFrame(
        [("sink-null-topic", b"a"), (None, b"b")], "topic string, value binary"
    ).coalesce(1)
    message = _error_of(lambda: sink(df.write, spark_broker).mode("append").save())
    assert "row 1 of this task has a null topic" in message


@pytest.mark.parametrize(
    ("schema", "rows", "options", "expected"),
    [
        ("key binary", [(b"k",)], {"topic": "t"}, "a value column is required"),
        ("value int", [(1,)], {"topic": "t"}, "column value must be binary or string, not int"),
        ("value binary, topic int", [(b"v", 1)], {}, "column topic must be a string"),
        ("value binary", [(b"v",)], {"topic": "t", "kafka.acks": "some"}, "kafka.acks"),
        ("value binary", [(b"v",)], {"topic": "t", "kafka.no.such": "1"}, "kafka.no.such"),
    ],
)
def test_bad_input_or_options_are_named(
    spark: SparkSession,
    spark_broker: BrokerProcess,
    schema: str,
    rows: list[tuple[object, ...]],
    options: dict[str, str],
    expected: str,
) -> None:
    df = spark.createDataFrame(rows, schema)
    message = _error_of(
        lambda: sink(df.write, spark_broker).options(**options).mode("append").save()
    )
    assert expected in message


def test_overwrite_is_refused(spark: SparkSession, spark_broker: BrokerProcess) -> None:
    df = spark.createDataFrame([(b"v",)], "value binary")
    writer = sink(df.write, spark_broker).option("topic", "t").mode("overwrite")
    assert "overwrite is not supported" in _error_of(writer.save)  # type: ignore[attr-defined]


def test_a_topic_that_does_not_exist_fails_the_write_naming_it(
    spark: SparkSession, spark_broker: BrokerProcess
) -> None:
    """The sink does not create topics (the broker refuses auto-creation here)."""
    df = spark.createDataFrame([(b"v",)], "value binary").coalesce(1)
    writer = (
        sink(df.write, spark_broker)
        .option("topic", "sink-no-such-topic")
        .option("kafka.request.timeout.ms", "3000")
        .mode("append")
    )
    message = _error_of(writer.save)  # type: ignore[attr-defined]
    assert "sink-no-such-topic" in message
