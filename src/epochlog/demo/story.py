"""The demo's story, phase by phase: a cluster, a live stream, a pipeline, an unclean
election in the middle of it, then what the evidence says about each event."""

from __future__ import annotations

import os
import time
import uuid
from dataclasses import dataclass
from typing import Any

from epochlog.demo import verify
from epochlog.demo.cluster_control import DemoCluster, DemoError, wait_for
from epochlog.demo.events import EventStream
from epochlog.demo.pipeline import (
    PipelineStats,
    RestartableQuery,
    spark_session,
    start_pipeline,
    start_sink_pipeline,
)
from epochlog.demo.progress import Progress, print_block
from epochlog.demo.report import Outcome, judge

TOPIC = "events"
# Where the exactly-once sink writes the events the source reads.
SINK_TOPIC = "events-exactly-once"
INTERNAL_PARTITIONS = 5
# Hang guards: generous bounds on things that take seconds; never a judgement of speed.
CATCH_UP_BOUND_S = 300.0
# Spark's first micro-batch also starts its Python workers: slow on a loaded machine.
FIRST_BATCH_BOUND_S = 420.0
ELECTION_BOUND_S = 120.0


@dataclass
class Settings:
    data_dir: str
    port: int
    partitions: int
    rate: int
    on_truncation: str
    # seconds of live stream before, during (lagging replica paused) and after the election
    steady_s: float
    lost_window_s: float
    after_s: float
    trigger_s: float
    # SIGTERM the brokers at the end (controlled shutdown, up to 20 s) or SIGKILL them
    clean_stop: bool = True
    # SASL_SSL only between everyone, as `epochlog up --secure`
    secure: bool = False


def _isr_without(cluster: DemoCluster, broker: int) -> bool:
    return all(broker not in p.isr for p in cluster.partitions(TOPIC))


def _all_led_by(cluster: DemoCluster, broker: int, above: dict[int, int]) -> bool:
    parts = cluster.partitions(TOPIC, via=broker)
    return all(p.leader == broker and p.leader_epoch > above[p.partition] for p in parts)


def _running(query: Any) -> None:
    """Before the election the query must run; say why it stopped if it did not."""
    if not query.isActive:
        raise DemoError(f"the streaming query stopped: {query.exception()}")


def _settled(cluster: DemoCluster, leaders: list[int], stats: PipelineStats, query: Any) -> bool:
    """Every partition's high watermark is its leader's log end, and the pipeline has
    written everything below it: no micro-batch with data is planned or running."""
    _running(query)
    _, _, read = stats.snapshot()
    for partition, leader in enumerate(leaders):
        end = cluster.log_end(leader, TOPIC, partition)
        if cluster.high_watermark(TOPIC, partition) != end or read.get(partition, 0) < end:
            return False
    return True


def _caught_up(cluster: DemoCluster, stats: PipelineStats, query: Any) -> bool:
    """The pipeline has written up to every partition's high watermark, records of the
    current leader epoch included (an offset reached in the lost epoch is not enough:
    the new leader may hold fewer records than were lost)."""
    if not query.isActive:
        return True
    _, _, read = stats.snapshot()
    epochs = stats.epochs()
    for p in cluster.partitions(TOPIC):
        end = cluster.high_watermark(TOPIC, p.partition)
        if end > 0 and (
            read.get(p.partition, 0) < end or epochs.get(p.partition) != p.leader_epoch
        ):
            return False
    return True


def run(settings: Settings) -> int:
    """Run the whole story; 0 when every check passed."""
    run_id = uuid.uuid4().hex[:8]
    data_dir = os.path.abspath(settings.data_dir)
    cluster = DemoCluster(os.path.join(data_dir, "cluster"), 3, settings.port, settings.secure)
    checkpoint = os.path.join(data_dir, "checkpoint")
    output = os.path.join(data_dir, "output")
    stats = PipelineStats()
    stream: EventStream | None = None
    query: Any = None
    sink: RestartableQuery | None = None
    spark: Any = None

    def counts() -> str:
        sent, acked, failed = stream.counts() if stream else (0, 0, 0)
        batches, rows, _ = stats.snapshot()
        return (
            f"produced={sent} acked={acked} failed={failed}"
            f" micro-batches={batches} rows written={rows}"
        )

    progress = Progress(counts)
    print(f"epochlog demo: run {run_id}, data in {data_dir}", flush=True)
    print(f"  onTruncation={settings.on_truncation}, {settings.rate} events/s", flush=True)
    try:
        progress.start()
        progress.phase("spark", "starting a local[2] SparkSession (the JVM takes a while)")
        spark = spark_session()
        progress.phase("cluster", "starting 3 brokers (embedded SQLite metastore)")
        cluster.start()
        controller = cluster.describe().controller_id
        lagging = max(b for b in range(3) if b != controller)
        leaders = [b for b in range(3) if b != lagging]
        assignment = [
            [leaders[i % 2], leaders[(i + 1) % 2], lagging] for i in range(settings.partitions)
        ]
        cluster.create_topic(
            TOPIC,
            assignment,
            {"unclean.leader.election.enable": "true", "min.insync.replicas": "1"},
        )
        progress.say(
            f"bootstrap.servers={cluster.bootstrap}; topic {TOPIC}: {settings.partitions}"
            f" partitions, replicas {assignment}, unclean.leader.election.enable=true"
        )
        cluster.create_topic(SINK_TOPIC, assignment, {"min.insync.replicas": "1"})
        # The sink's coordinators (transactions, its progress offsets) live on the two
        # brokers that stay up while the lagging one is paused: a paused coordinator
        # would hold the sink's tasks, and with them Spark's task slots, until resumed.
        coordinated = [[leaders[i % 2], leaders[(i + 1) % 2]] for i in range(INTERNAL_PARTITIONS)]
        for internal in ("__transaction_state", "__consumer_offsets"):
            cluster.create_topic(
                internal, coordinated, {"cleanup.policy": "compact", "min.insync.replicas": "1"}
            )
        old_epochs = {p.partition: p.leader_epoch for p in cluster.partitions(TOPIC)}

        stream = EventStream(cluster.client, TOPIC, settings.rate, run_id)
        stream.start()
        query = start_pipeline(
            spark,
            cluster.client,
            TOPIC,
            checkpoint,
            output,
            settings.on_truncation,
            stats,
            settings.trigger_s,
        )
        client = cluster.client

        def sink_query() -> Any:
            return start_sink_pipeline(
                spark,
                client,
                TOPIC,
                SINK_TOPIC,
                os.path.join(data_dir, "sink-checkpoint"),
                settings.on_truncation,
                settings.trigger_s,
            )

        sink = RestartableQuery(sink_query)
        progress.phase(
            "streaming",
            f"events -> per-user counts and sums -> parquet in {output};"
            f" events -> topic {SINK_TOPIC} (exactly-once sink)",
        )
        wait_for(
            lambda: _running(query) or stats.snapshot()[1] > 0,
            FIRST_BATCH_BOUND_S,
            "the first rows written",
        )
        progress.say("restarting the exactly-once sink's query from its checkpoint")
        sink.restart()
        time.sleep(settings.steady_s)

        progress.phase(
            "lagging replica",
            f"SIGSTOP broker {lagging}: it falls out of the ISR and stops copying",
        )
        cluster.pause(lagging)
        wait_for(lambda: _isr_without(cluster, lagging), 60, f"broker {lagging} to leave the ISR")
        progress.say(f"broker {lagging} left the ISR; the others go on acknowledging writes")
        time.sleep(settings.lost_window_s)
        # The stream holds while the pipeline catches up, so that the election lands
        # between micro-batches: a batch planned before a truncation and read after it
        # fails its task (the source reads exactly what it planned, or nothing).
        stream.hold()
        progress.say("the stream holds a moment: the election will land between micro-batches")
        wait_for(
            lambda: _settled(cluster, [r[0] for r in assignment], stats, query),
            CATCH_UP_BOUND_S,
            "the pipeline to read everything the leaders hold",
        )
        marks = {p: cluster.high_watermark(TOPIC, p) for p in range(settings.partitions)}
        progress.say(
            f"the pipeline has read up to the high watermarks {marks}, past what broker"
            f" {lagging} holds"
        )

        progress.phase(
            "unclean election",
            f"SIGKILL brokers {leaders} (the whole ISR), SIGCONT broker {lagging}",
        )
        for broker in leaders:
            cluster.kill(broker)
        cluster.resume(lagging)
        stream.resume()
        wait_for(
            lambda: _all_led_by(cluster, lagging, old_epochs),
            ELECTION_BOUND_S,
            f"broker {lagging} to be elected leader uncleanly",
        )
        new_epochs = {p.partition: p.leader_epoch for p in cluster.partitions(TOPIC)}
        progress.say(f"broker {lagging} leads every partition; epochs {old_epochs} -> {new_epochs}")
        time.sleep(settings.after_s)

        progress.phase("recovery", f"restarting brokers {leaders}: they truncate to the leader")
        for broker in leaders:
            cluster.restart(broker)
        wait_for(
            lambda: all(sorted(p.isr) == [0, 1, 2] for p in cluster.partitions(TOPIC)),
            ELECTION_BOUND_S,
            "the restarted brokers to rejoin the ISR",
        )
        time.sleep(settings.after_s)

        progress.phase("draining", "producer stopped; the pipeline reads to the end")
        stream.stop()
        wait_for(
            lambda: _caught_up(cluster, stats, query), CATCH_UP_BOUND_S, "the pipeline to catch up"
        )
        query_error = _stop_query(query)
        if settings.on_truncation != "fail":
            source_ids = set(verify.committed_event_ids(cluster.client, TOPIC, settings.partitions))
            wait_for(
                lambda: (
                    sink.revive()
                    or source_ids
                    <= set(
                        verify.committed_event_ids(cluster.client, SINK_TOPIC, settings.partitions)
                    )
                ),
                CATCH_UP_BOUND_S,
                "the exactly-once sink to catch up",
            )
        sink.stop()
        progress.stop()

        progress.phase("checking", "a fresh batch read of the topic, the output, the quarantine")
        outcome = Outcome(
            on_truncation=settings.on_truncation,
            lagging=lagging,
            killed=leaders,
            old_epochs=old_epochs,
            new_epochs=new_epochs,
            acked=dict(stream.acked.written),
            failed=dict(stream.acked.failed),
            sent=stream.sent,
            surviving=verify.topic_events(spark, cluster.client, TOPIC),
            written=verify.output_events(spark, output),
            aggregate_total=verify.aggregate_total(spark, output),
            quarantine=verify.quarantined(cluster.log_dirs(), TOPIC),
            offsets=verify.checkpoint_offsets(checkpoint),
            query_error=query_error,
            batches=stats.snapshot()[0],
            sink_ids=verify.committed_event_ids(cluster.client, SINK_TOPIC, settings.partitions),
            sink_restarts=sink.restarts,
        )
        checks = judge(outcome)
    except DemoError as exc:
        progress.stop()
        print(f"\nepochlog demo: FAILED: {exc}", flush=True)
        return 1
    finally:
        progress.stop()
        if stream is not None:
            stream.stop(10)
        if query is not None and query.isActive:
            _stop_query(query)
        if sink is not None:
            sink.stop()
        if spark is not None:
            spark.stop()
        cluster.stop(settings.clean_stop)
    failed = [c for c in checks if not c.passed]
    print_block(
        "checks",
        [f"{'PASS' if c.passed else 'FAIL'} {c.name}: {c.detail}" for c in checks],
    )
    print(
        f"\nepochlog demo: {'PASSED' if not failed else 'FAILED'}"
        f" ({len(checks) - len(failed)}/{len(checks)} checks passed); data in {data_dir}",
        flush=True,
    )
    return 0 if not failed else 1


def _stop_query(query: Any) -> str | None:
    """Stop the query; the error it ended with, if any (``fail`` ends it that way)."""
    error = query.exception()
    if query.isActive:
        query.stop()
    return None if error is None else str(error)
