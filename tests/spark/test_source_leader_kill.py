"""SIGKILL of a partition leader while a streaming query reads (3 brokers, replication
factor 3, acks=all idempotent producer): every acknowledged record reaches the parquet
output exactly once — no loss, no duplicate — and the source reports no truncation (a
clean election loses nothing)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from cluster_harness import Cluster, eventually
from continuous_producer import ContinuousProducer
from pyspark.sql import SparkSession
from source_support import (
    QUERY_BOUND_S,
    committed,
    finish,
    offset_log,
    produce,
    read_output,
    stream,
)

from support.broker import wait_until

TOPIC = "killed-leader"
# Acknowledged records wanted after the new leader took over.
AFTER_KILL = 1000


def test_sigkill_of_a_partition_leader_loses_and_repeats_nothing(
    spark: SparkSession, spark_cluster: Cluster, tmp_path: Path
) -> None:
    cluster = spark_cluster
    cluster.create_topic(TOPIC, partitions=1, replication=3, min_insync_replicas="2")
    checkpoint, out = tmp_path / "cp", tmp_path / "out"
    df = stream(
        spark,
        cluster.bootstrap,
        subscribe=TOPIC,
        startingOffsets="earliest",
        **{"kafka.retry.backoff.max.ms": 500},
    )
    # The query is up and has written a batch before the live stream begins.
    early = [b"early-%d" % i for i in range(100)]
    produce(cluster.bootstrap, TOPIC, early, keys=early)
    query = (
        df.writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    eventually(
        lambda: not query.isActive or committed(checkpoint) >= 1,
        QUERY_BOUND_S,
        "the query's first batch",
    )
    assert query.isActive, f"query failed: {query.exception()}"
    producer = ContinuousProducer(cluster.bootstrap, TOPIC).start()
    try:
        eventually(
            lambda: not query.isActive or committed(checkpoint) >= 2,
            QUERY_BOUND_S,
            "the query to read batches before the kill",
        )
        assert query.isActive, f"query failed: {query.exception()}"
        leader, _ = cluster.leader(TOPIC)
        cluster.kill(leader)
        batches_at_kill = len(offset_log(checkpoint))
        acked_at_kill = producer.acked()
        eventually(
            lambda: producer.acked() >= acked_at_kill + AFTER_KILL,
            QUERY_BOUND_S,
            "acks after the kill",
        )
        eventually(lambda: cluster.leader(TOPIC)[0] not in (leader, -1), 60, "a new leader")
    finally:
        reports = producer.stop()
    acked = {d.key for d in reports if d.error is None} | set(early)
    # The running query catches up with what was acknowledged (its checkpoint says so:
    # planned to the last acknowledged offset and committed), then stops.
    last_acked = max(d.offset for d in reports if d.error is None)

    def caught_up() -> bool:
        if not query.isActive:
            return True
        ends = offset_log(checkpoint)
        planned = ends[-1]["topics"][TOPIC]["partitions"]["0"]["offset"]
        return planned > last_acked and committed(checkpoint) >= len(ends)

    wait_until(caught_up, QUERY_BOUND_S, "the query to read every acknowledged record", 1.0)
    query.stop()
    assert finish(query) is None

    keys = Counter(bytes(r.key) for r in read_output(df, out).select("key").collect())
    assert set(keys) >= acked, f"lost: {sorted(acked - set(keys))[:10]}"
    assert max(keys.values()) == 1, f"duplicates: {[k for k, n in keys.items() if n > 1][:10]}"
    ends = offset_log(checkpoint)
    assert len(ends) > batches_at_kill  # batches were planned and read after the kill
    assert not [e for end in ends for e in end.get("events", []) if e["event"] != "newPartition"]
