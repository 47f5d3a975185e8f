"""Exactly-once from epochlog into parquet across a SIGKILL of the Spark driver in the
middle of a micro-batch and a restart from the checkpoint.

The file sink is exactly-once by its metadata log (``_spark_metadata``): files of a
batch that never committed are not part of the output. That holds only if the source,
asked again for the batch in the offset log, reads exactly the same records. The driver
runs as its own process (tests/spark/driver_kill_pipeline.py) so that it can be killed
like a crashed host, JVM and Python workers together."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import confluent_kafka as ck
import pytest
from pyspark.sql import SparkSession

from support.broker import BrokerProcess, wait_until
from support.clients import create_topic

pytestmark = pytest.mark.long

PIPELINE = Path(__file__).with_name("driver_kill_pipeline.py")
# Hang guards: a Spark driver starts in seconds to tens of seconds on a busy machine.
BATCH_BOUND_S = 300.0
RUN_BOUND_S = 600.0
MAX_OFFSETS = 4000


def produce(bootstrap: str, topic: str, first: int, count: int) -> list[str]:
    """Records ``rec-<n>`` spread over the topic's partitions by key."""
    producer = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 10})
    errors: list[object] = []
    values = [f"rec-{n}" for n in range(first, first + count)]
    for v in values:
        while True:
            try:
                producer.produce(topic, v.encode(), key=v.encode(), on_delivery=_collect(errors))
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(120) == 0 and not errors, errors[:3]
    return values


def _collect(errors: list[object]) -> object:
    def done(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(err)

    return done


def start_driver(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    """The pipeline in its own process group, so a SIGKILL takes JVM and workers too."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, str(PIPELINE), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )


def tail(log: Path, lines: int = 60) -> str:
    text = log.read_text(errors="replace").splitlines() if log.exists() else []
    return "\n".join(text[-lines:])


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(60)


def uncommitted_files(output: Path) -> set[str]:
    """Parquet files in the output directory that the sink's metadata log does not list."""
    listed = set()
    for entry in (output / "_spark_metadata").glob("[0-9]*"):
        for line in entry.read_text().splitlines()[1:]:
            listed.add(Path(json.loads(line)["path"].removeprefix("file://")).name)
    return {p.name for p in output.glob("*.parquet")} - listed


def test_parquet_output_is_exactly_once_across_a_driver_sigkill(
    spark: SparkSession, spark_broker: BrokerProcess, tmp_path: Path
) -> None:
    try:
        kill_and_restart(spark, spark_broker, tmp_path)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n--- driver log:\n{tail(tmp_path / 'driver.log')}") from None


def kill_and_restart(spark: SparkSession, spark_broker: BrokerProcess, tmp_path: Path) -> None:
    topic = "driver-kill"
    create_topic(spark_broker.bootstrap, topic, 2)
    expected = produce(spark_broker.bootstrap, topic, 0, 5 * MAX_OFFSETS)
    checkpoint, output, markers = tmp_path / "checkpoint", tmp_path / "out", tmp_path / "markers"
    markers.mkdir()
    log = tmp_path / "driver.log"
    args = [spark_broker.bootstrap, topic, str(checkpoint), str(output), str(markers)]
    args += ["--max-offsets", str(MAX_OFFSETS)]

    driver = start_driver([*args, "--hold-from-batch", "1"], log)
    try:
        # Batch 1 is planned only once batch 0 has committed; its task 1 is now held
        # and task 0 writes its file, which no commit will ever list.
        wait_until(
            lambda: (markers / "holding-batch-1").exists() or driver.poll() is not None,
            BATCH_BOUND_S,
            "micro-batch 1 running",
        )
        wait_until(
            lambda: uncommitted_files(output) or driver.poll() is not None,
            BATCH_BOUND_S,
            "a parquet file of the unfinished batch 1",
        )
        assert driver.poll() is None, "driver ended before batch 1 ran\n" + tail(log)
        stray = uncommitted_files(output)
        assert (checkpoint / "commits" / "0").exists()
        assert (checkpoint / "offsets" / "1").exists()
        planned = (checkpoint / "offsets" / "1").read_text()
    finally:
        kill_group(driver)
    assert not (checkpoint / "commits" / "1").exists()

    # More records after the crash: the replayed batch must still end where planned.
    expected += produce(spark_broker.bootstrap, topic, len(expected), 2 * MAX_OFFSETS)

    restarted = start_driver(args, log)
    try:
        rc = restarted.wait(RUN_BOUND_S)
    finally:
        kill_group(restarted)
    assert rc == 0, "restarted driver failed\n" + tail(log)
    assert (checkpoint / "offsets" / "1").read_text() == planned
    assert (checkpoint / "commits" / "1").exists()
    assert stray <= uncommitted_files(output), "the killed batch's file became part of the output"

    got = spark.read.parquet(str(output))
    values = [r["value"] for r in got.select("value").collect()]
    missing = sorted(set(expected) - set(values))
    twice = sorted(v for v, n in Counter(values).items() if n > 1)
    assert not missing and not twice, (
        f"{len(values)} rows for {len(expected)} records; {len(missing)} missing "
        f"{missing[:5]}, {len(twice)} more than once {twice[:5]}"
    )
    assert sorted(values) == sorted(expected)
    pairs = got.selectExpr("partition", "offset").distinct().count()
    assert pairs == len(expected)
