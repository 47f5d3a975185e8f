"""The streaming source on a real broker: availableNow reads exactly what was produced,
with every column; maxOffsetsPerTrigger splits batches; startingOffsets variants."""

from __future__ import annotations

import json
from pathlib import Path

from pyspark.sql import SparkSession
from source_support import offset_log, produce, run_available_now, stream, unique

from support.broker import BrokerProcess
from support.clients import create_topic


def test_available_now_reads_exactly_what_was_produced(
    spark: SparkSession, spark_broker: BrokerProcess, tmp_path: Path
) -> None:
    topic = unique("stream")
    create_topic(spark_broker.bootstrap, topic, partitions=2)
    values = [f"v{i}".encode() for i in range(50)]
    placed = produce(spark_broker.bootstrap, topic, values[:30], partition=0, keys=[b"k"] * 30)
    placed += produce(
        spark_broker.bootstrap, topic, values[30:], partition=1, headers=[("h", b"x")]
    )
    df = stream(
        spark,
        spark_broker.bootstrap,
        subscribe=topic,
        startingOffsets="earliest",
        includeHeaders="true",
    )
    rows = run_available_now(df, tmp_path / "cp", tmp_path / "out").collect()
    got = sorted((r.partition, r.offset, bytes(r.value)) for r in rows)
    assert got == sorted((p, o, v) for (p, o), v in zip(placed, values, strict=True))
    for r in rows:
        assert r.topic == topic
        assert r.leaderEpoch == 0
        assert r.timestamp is not None
        assert r.timestampType == 0
        if r.partition == 0:
            assert bytes(r.key) == b"k" and r.headers == []
        else:
            assert r.key is None
            assert [(h.key, bytes(h.value)) for h in r.headers] == [("h", b"x")]
    (end,) = offset_log(tmp_path / "cp")
    parts = end["topics"][topic]["partitions"]
    # Each position keeps the epoch and the time of the record before it.
    last_times = {
        str(r.partition): round(r.timestamp.timestamp() * 1000)
        for r in rows
        if (r.partition, r.offset) in ((0, 29), (1, 19))
    }
    assert parts == {
        "0": {"offset": 30, "epoch": 0, "timestamp": last_times["0"]},
        "1": {"offset": 20, "epoch": 0, "timestamp": last_times["1"]},
    }


def test_max_offsets_per_trigger_splits_batches(
    spark: SparkSession, spark_broker: BrokerProcess, tmp_path: Path
) -> None:
    topic = unique("limit")
    create_topic(spark_broker.bootstrap, topic, partitions=2)
    produce(spark_broker.bootstrap, topic, [b"a%d" % i for i in range(130)], partition=0)
    produce(spark_broker.bootstrap, topic, [b"b%d" % i for i in range(120)], partition=1)
    df = stream(
        spark,
        spark_broker.bootstrap,
        subscribe=topic,
        startingOffsets="earliest",
        maxOffsetsPerTrigger=100,
    )
    rows = run_available_now(df, tmp_path / "cp", tmp_path / "out").collect()
    assert sorted((r.partition, r.offset) for r in rows) == sorted(
        [(0, o) for o in range(130)] + [(1, o) for o in range(120)]
    )
    ends = offset_log(tmp_path / "cp")
    sizes = []
    before = {"0": 0, "1": 0}
    for end in ends:
        parts = end["topics"][topic]["partitions"]
        sizes.append(sum(parts[p]["offset"] - before[p] for p in parts))
        before = {p: parts[p]["offset"] for p in parts}
    assert sizes == [100, 100, 50]


def test_starting_offsets_json_with_epochs_latest_and_timestamps(
    spark: SparkSession, spark_broker: BrokerProcess, tmp_path: Path
) -> None:
    topic = unique("starting")
    bootstrap = spark_broker.bootstrap
    create_topic(bootstrap, topic, partitions=2)
    produce(bootstrap, topic, [b"a%d" % i for i in range(10)], partition=0)
    produce(bootstrap, topic, [b"b%d" % i for i in range(10)], partition=1)

    # JSON: an offset with its epoch (validated against the leader) and -2 (earliest).
    start = {topic: {"0": {"offset": 7, "epoch": 0}, "1": -2}}
    df = stream(spark, bootstrap, subscribe=topic, startingOffsets=json.dumps(start))
    from_json = run_available_now(df, tmp_path / "json", tmp_path / "json-out")
    got = sorted((r.partition, r.offset) for r in from_json.collect())
    assert got == [(0, 7), (0, 8), (0, 9)] + [(1, o) for o in range(10)]

    # By timestamp: the first record at or after the time of partition 1's record 4.
    at = from_json.where("partition = 1 and offset = 4").select("timestamp")
    millis = int(at.collect()[0].timestamp.timestamp() * 1000)
    df = stream(
        spark,
        bootstrap,
        assign=json.dumps({topic: [1]}),
        startingOffsetsByTimestamp=json.dumps({topic: {"1": millis}}),
    )
    got = sorted(
        r.offset for r in run_available_now(df, tmp_path / "ts", tmp_path / "ts-out").collect()
    )
    assert got[-1] == 9 and got[0] <= 4 and got == list(range(got[0], 10))

    # latest: nothing of what exists; later records on a restart from the checkpoint.
    df = stream(
        spark, bootstrap, subscribePattern=topic.replace("-", "."), startingOffsets="latest"
    )
    assert run_available_now(df, tmp_path / "latest", tmp_path / "latest-out").count() == 0
    produce(bootstrap, topic, [b"later"], partition=1)
    df = stream(
        spark, bootstrap, subscribePattern=topic.replace("-", "."), startingOffsets="latest"
    )
    rows = run_available_now(df, tmp_path / "latest", tmp_path / "latest-out").collect()
    got = [(r.partition, r.offset, bytes(r.value)) for r in rows]
    assert got == [(1, 10, b"later")]
