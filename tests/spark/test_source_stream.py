"""The streaming source on a real broker: availableNow reads exactly what was produced,
with every column; maxOffsetsPerTrigger splits batches; startingOffsets variants."""

from __future__ import annotations

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
    run_available_now(df, tmp_path / "cp", "exact")
    rows = spark.sql("select * from exact").collect()
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
    assert parts == {"0": {"offset": 30, "epoch": 0}, "1": {"offset": 20, "epoch": 0}}
