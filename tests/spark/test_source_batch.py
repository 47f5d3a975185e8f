"""The batch source over offset and timestamp ranges, and records deleted by retention
before a query read them: reported with their exact range, never skipped silently."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from source_support import offset_log, produce, run_available_now, stream, unique

from epochlog.client import TopicPartition
from epochlog.client.sync import Admin
from support.broker import BrokerProcess, wait_until
from support.clients import create_topic


def test_batch_reads_offset_and_timestamp_ranges(
    spark: SparkSession, spark_broker: BrokerProcess
) -> None:
    topic = unique("batch")
    bootstrap = spark_broker.bootstrap
    create_topic(bootstrap, topic, partitions=2)
    # Recent times: older ones would be deleted by time-based retention.
    base_ms = int(time.time() * 1000) - 60_000
    produce(
        bootstrap,
        topic,
        [b"a%d" % i for i in range(20)],
        partition=0,
        timestamps=[base_ms + 10 * i for i in range(20)],
    )
    produce(bootstrap, topic, [b"b%d" % i for i in range(20)], partition=1)

    def read(**options: str) -> list[tuple[int, int, bytes]]:
        reader = spark.read.format("epochlog").option("bootstrap.servers", bootstrap)
        for k, v in options.items():
            reader = reader.option(k, v)
        rows = reader.load().collect()
        return sorted((r.partition, r.offset, bytes(r.value)) for r in rows)

    everything = read(subscribe=topic)
    assert everything == sorted(
        [(0, i, b"a%d" % i) for i in range(20)] + [(1, i, b"b%d" % i) for i in range(20)]
    )
    ranged = read(
        subscribe=topic,
        startingOffsets=json.dumps({topic: {"0": 5, "1": -2}}),
        endingOffsets=json.dumps({topic: {"0": 15, "1": -1}}),
    )
    assert ranged == [(0, i, b"a%d" % i) for i in range(5, 15)] + [
        (1, i, b"b%d" % i) for i in range(20)
    ]
    # Record i of partition 0 has the time base + 10 i: from 3 (exactly) to before 12.
    by_time = read(
        assign=json.dumps({topic: [0]}),
        startingOffsetsByTimestamp=json.dumps({topic: {"0": base_ms + 25}}),
        endingOffsetsByTimestamp=json.dumps({topic: {"0": base_ms + 120}}),
    )
    assert by_time == [(0, i, b"a%d" % i) for i in range(3, 12)]


def test_records_deleted_by_retention_before_they_were_read_are_reported(
    spark: SparkSession, spark_broker: BrokerProcess, tmp_path: Path
) -> None:
    topic = unique("retention")
    bootstrap = spark_broker.bootstrap
    # Small segments: each produce call below makes a segment of its own.
    create_topic(bootstrap, topic, config={"segment.bytes": "100", "cleanup.policy": "delete"})
    for i in range(5):
        produce(bootstrap, topic, [b"early-%d" % i])
    df = stream(
        spark, bootstrap, subscribe=topic, startingOffsets="earliest", onTruncation="earliest"
    )
    first = run_available_now(df, tmp_path / "cp", tmp_path / "out").collect()
    assert sorted(r.offset for r in first) == list(range(5))

    for i in range(10):
        produce(bootstrap, topic, [b"later-%d" % i])
    admin = Admin({"bootstrap.servers": bootstrap})
    tp = TopicPartition(topic, 0)
    try:
        # Every segment but the active one (offset 14 alone) goes.
        admin.alter_topic_configs(topic, {"retention.bytes": "1"})

        def log_start() -> int:
            answer = admin.list_offsets({tp: -2})[tp]
            return answer.offset

        wait_until(lambda: log_start() == 14, 120, "retention to delete unread records")
        deleted_until = log_start()
    finally:
        admin.close()

    # onTruncation=fail: a batch read from offset 0 stops, naming the range.
    with pytest.raises(Exception, match=rf"{topic}-0: offsets 0\.\.{deleted_until - 1}"):
        spark.read.format("epochlog").option("bootstrap.servers", bootstrap).option(
            "subscribe", topic
        ).option("startingOffsets", json.dumps({topic: {"0": 0}})).load().collect()

    # The streaming query goes on (earliest) and reports what it never read.
    out = run_available_now(df, tmp_path / "cp", tmp_path / "out").collect()
    got = sorted(r.offset for r in out)
    assert got == list(range(5)) + list(range(deleted_until, 15))
    last = offset_log(tmp_path / "cp")[-1]
    (event,) = last["events"]
    assert event["event"] == "retention"
    assert (event["lostFrom"], event["lostUntil"], event["resumeAt"]) == (
        5,
        deleted_until,
        deleted_until,
    )
    assert f"offsets 5..{deleted_until - 1}" in event["message"]
    assert last["starts"][topic]["0"]["offset"] == deleted_until
