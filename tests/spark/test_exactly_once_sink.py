"""The exactly-once epochlog sink (deliveryGuarantee=exactly-once) on a real broker:
a batch write, and a streaming query whose driver process is SIGKILLed twice in the
middle of micro-batches and restarted from its checkpoint, with a task failure injected
once and a micro-batch replayed after its commit: the output topic, read with
read_committed, holds each input row exactly once."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from test_exactly_once_driver_kill import (
    BATCH_BOUND_S,
    RUN_BOUND_S,
    kill_group,
    produce,
    start_driver,
    tail,
)

from epochlog.client import Consumer, TopicPartition
from support.broker import BrokerProcess, wait_until
from support.clients import create_topic

pytestmark = pytest.mark.long

MAX_OFFSETS = 2000
READ_BOUND_S = 120.0


def read_committed(bootstrap: str, topic: str, partitions: int) -> list[bytes]:
    """Every value a read_committed reader gets, once nothing more comes."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        got: list[bytes] = []
        idle = 0
        deadline = time.monotonic() + READ_BOUND_S
        while idle < 4 and time.monotonic() < deadline:
            values = [r.value or b"" for r in consumer.poll(0.5)]
            got.extend(values)
            idle = 0 if values else idle + 1
        return got
    finally:
        consumer.close()


def test_batch_write_exactly_once_is_visible_only_after_the_job_commits(
    spark: SparkSession, spark_broker: BrokerProcess
) -> None:
    topic = "eos-batch"
    create_topic(spark_broker.bootstrap, topic, 2)
    rows = [(f"k{i}", f"v{i}") for i in range(20_000)]
    (
        spark.createDataFrame(rows, "key string, value string")
        .repartition(3)
        .write.format("epochlog")
        .option("bootstrap.servers", spark_broker.bootstrap)
        .option("topic", topic)
        .option("deliveryGuarantee", "exactly-once")
        .mode("append")
        .save()
    )
    got = read_committed(spark_broker.bootstrap, topic, 2)
    assert sorted(got) == sorted(v.encode() for _, v in rows)


def test_streaming_exactly_once_across_driver_kills_a_task_failure_and_a_replay(
    spark: SparkSession, spark_broker: BrokerProcess, tmp_path: Path
) -> None:
    try:
        kills_failure_and_replay(spark_broker, tmp_path)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n--- driver log:\n{tail(tmp_path / 'driver.log')}") from None


def kills_failure_and_replay(spark_broker: BrokerProcess, tmp_path: Path) -> None:
    bootstrap = spark_broker.bootstrap
    source, out = "eos-in", "eos-out"
    create_topic(bootstrap, source, 2)
    create_topic(bootstrap, out, 2)
    expected = produce(bootstrap, source, 0, 6 * MAX_OFFSETS)
    checkpoint, markers = tmp_path / "checkpoint", tmp_path / "markers"
    markers.mkdir()
    log = tmp_path / "driver.log"
    args = [bootstrap, source, str(checkpoint), str(tmp_path / "unused"), str(markers)]
    args += ["--max-offsets", str(MAX_OFFSETS), "--to-topic", out]

    for held_batch in (1, 3):
        # Task 1 of the batch is held; task 0 prepares its transaction; then SIGKILL.
        driver = start_driver([*args, "--hold-from-batch", str(held_batch)], log)
        try:
            wait_until(
                lambda b=held_batch, d=driver: (
                    (markers / f"holding-batch-{b}").exists() or d.poll() is not None
                ),
                BATCH_BOUND_S,
                f"micro-batch {held_batch} running",
            )
            assert driver.poll() is None, f"driver ended before batch {held_batch} ran"
            time.sleep(3)  # task 0 writes and prepares meanwhile
        finally:
            kill_group(driver)
        assert not (checkpoint / "commits" / str(held_batch)).exists()

    # A clean run with one task failure (retried by Spark) finishes the stream.
    final = start_driver([*args, "--fail-task-once", "4"], log)
    assert final.wait(RUN_BOUND_S) == 0, "the final run failed"
    assert (markers / "failed-once").exists(), "the task failure was never injected"
    commits = sorted(int(p.name) for p in (checkpoint / "commits").glob("[0-9]*"))
    assert commits, "no micro-batch committed"

    # The last batch replayed after its commit: its tasks find it committed already.
    (checkpoint / "commits" / str(commits[-1])).unlink()
    (checkpoint / "commits" / f".{commits[-1]}.crc").unlink(missing_ok=True)
    replay = start_driver(args, log)
    assert replay.wait(RUN_BOUND_S) == 0, "the replay run failed"

    got = Counter(v.decode() for v in read_committed(bootstrap, out, 2))
    twice = [v for v, n in got.items() if n > 1]
    assert not twice, f"{len(twice)} rows written twice, e.g. {twice[:5]}"
    missing = set(expected) - set(got)
    assert not missing, f"{len(missing)} rows missing, e.g. {sorted(missing)[:5]}"
    assert set(got) == set(expected)
