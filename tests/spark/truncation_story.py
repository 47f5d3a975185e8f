"""An unclean leader election under a running pipeline, once per ``onTruncation`` value,
on a real 3-broker cluster (SQLite metastore): the story, told with any Spark (the
shared ``local[2]`` session, or a driver process on a standalone cluster), and the
checks of what the pipeline did.

The story (replicas [A, C] of every topic, unclean election allowed, the controller K
outside them): FIRST (offsets 0..4) is written to both replicas; C is paused and leaves
the ISR; LOST (5..9) is written to A alone. One availableNow query per policy reads all
ten records into parquet, with a checkpoint. A is killed and C, resumed, is elected
uncleanly: it takes NEW at offsets 5..7. Each query is run again from its checkpoint.

The source finds the divergence with OffsetsForLeaderEpoch (C's epoch of the record
before offset 10 ends at 5): records 5..9 that the query read are gone. ``fail`` stops
the query naming the partition and that range; ``earliest``, ``latest`` and ``closest``
(the client's table: the divergence offset when it is known) report the range in the
offset log and read NEW from offset 5, so the output holds FIRST, LOST and NEW, each
once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cluster_harness import Cluster
from pyspark.sql import SparkSession
from source_support import finish, offset_log, produce, read_output, start_available_now, stream

from support.broker import wait_until

POLICIES = ("fail", "earliest", "latest", "closest")
FIRST = [b"first-%d" % i for i in range(5)]
LOST = [b"lost-%d" % i for i in range(5)]
NEW = [b"new-%d" % i for i in range(3)]
BOUND_S = 120.0

# (offset, value, leaderEpoch) of each row a query wrote, sorted.
Rows = list[tuple[int, bytes, int]]


@dataclass
class Run:
    """One availableNow run of every policy's query: its error (None: it succeeded)
    and everything its output holds after it."""

    errors: dict[str, str | None]
    outputs: dict[str, Rows]


# Runs every policy's query (topics by policy) under ``base`` against ``bootstrap``.
QueryRunner = Callable[[Path, dict[str, str], str], Run]


@dataclass
class Story:
    base: Path
    topics: dict[str, str] = field(default_factory=dict)
    first_run: dict[str, list[Any]] = field(default_factory=dict)
    errors: dict[str, str | None] = field(default_factory=dict)
    outputs: dict[str, Rows] = field(default_factory=dict)
    ends: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    epochs: dict[str, int] = field(default_factory=dict)
    bootstrap: str = ""


def run_policies(spark: SparkSession, base: Path, topics: dict[str, str], bootstrap: str) -> Run:
    """One availableNow run per policy, one after the other (Python workers started
    for several queries at once may time out connecting back on a loaded machine)."""
    run = Run({}, {})
    for policy, topic in topics.items():
        df = stream(
            spark,
            bootstrap,
            subscribe=topic,
            startingOffsets="earliest",
            onTruncation=policy,
            **{"kafka.retry.backoff.max.ms": 500},
        )
        query = start_available_now(df, base / f"cp-{policy}", base / f"out-{policy}")
        error = finish(query)
        run.errors[policy] = None if error is None else str(error)
        rows = read_output(df, base / f"out-{policy}").collect()
        run.outputs[policy] = sorted((r.offset, bytes(r.value), r.leaderEpoch) for r in rows)
    return run


def start_ordered(base: Path) -> tuple[Cluster, int, int, int]:
    """Three brokers; K (highest port) the controller, A (lowest) the broker clients ask
    first, so that nobody waits on C while it is paused. Returns (cluster, A, C, K)."""
    cluster = Cluster(base, f"sqlite://{base}/metastore.db", 3, {})
    a, c, k = (b.broker_id for b in sorted(cluster.brokers, key=lambda b: b.port))
    try:
        cluster.brokers[k].start()
        wait_until(lambda: cluster.controller_id() == k, 60, "the first controller")
        cluster.brokers[c].start()
        cluster.brokers[a].start()
        cluster.wait_for_brokers()
    except BaseException:
        cluster.close()
        raise
    return cluster, a, c, k


@contextmanager
def told(base: Path, run: QueryRunner) -> Iterator[Story]:
    """The story, its queries run by ``run``; the cluster lives until the block ends."""
    cluster, a, c, k = start_ordered(base)
    s = Story(base, {p: f"trunc-{p}" for p in POLICIES})
    try:
        for topic in s.topics.values():
            cluster.create_topic(
                topic,
                assignment=[[a, c]],
                unclean_leader_election_enable="true",
                min_insync_replicas="1",
            )
            produce(cluster.bootstrap, topic, FIRST)
        for topic in s.topics.values():
            wait_until(lambda t=topic: cluster.log_end_offset(c, t) == 5, 60, f"C holds {topic}")
        cluster.pause(c)
        wait_until(
            lambda: all(
                c not in cluster.metadata(t, via=k)["partitions"][0].isr for t in s.topics.values()
            ),
            60,
            "the paused replica to leave the ISR",
        )
        for topic in s.topics.values():
            assert [o for _, o in produce(cluster.live_bootstrap(), topic, LOST)] == list(
                range(5, 10)
            )

        first = run(base, s.topics, cluster.live_bootstrap())
        assert first.errors == dict.fromkeys(POLICIES)
        for policy in POLICIES:
            assert [v for _, v, _ in first.outputs[policy]] == FIRST + LOST
            s.first_run[policy] = offset_log(base / f"cp-{policy}")

        cluster.kill(a)
        cluster.resume(c)
        topics = list(s.topics.values())
        wait_until(
            lambda: all(cluster.metadata(t, via=c)["partitions"][0].leader == c for t in topics),
            BOUND_S,
            "C elected uncleanly",
        )
        wait_until(
            lambda: all(cluster.list_offsets(c, t).error == 0 for t in topics),
            60,
            "C to serve as leader",
        )
        s.epochs["unclean"] = cluster.metadata(topics[0], via=c)["partitions"][0].leader_epoch
        for topic in topics:
            assert [o for _, o in produce(cluster.live_bootstrap(), topic, NEW)] == [5, 6, 7]

        s.bootstrap = cluster.live_bootstrap()
        second = run(base, s.topics, cluster.live_bootstrap())
        s.errors, s.outputs = second.errors, second.outputs
        for policy in POLICIES:
            s.ends[policy] = offset_log(base / f"cp-{policy}")
        yield s
    finally:
        cluster.close()


def check_fail_stopped(story: Story) -> None:
    """``fail`` stopped the query naming the partition and the lost range, and read
    nothing after the truncation."""
    text = story.errors["fail"]
    assert text is not None
    assert "trunc-fail-0" in text
    assert "offsets 5..9 (5 records)" in text
    assert "onTruncation=fail" in text
    assert [v for _, v, _ in story.outputs["fail"]] == FIRST + LOST
    assert len(story.ends["fail"]) == len(story.first_run["fail"])


def check_policy_resumed(story: Story, policy: str) -> None:
    """An automatic policy reported the exact lost range in the offset log, resumed at
    the divergence, and the output holds every record it read exactly once."""
    assert story.errors[policy] is None, story.errors[policy]
    topic = story.topics[policy]
    out = story.outputs[policy]
    # First run: FIRST and LOST (read before the election); second: NEW at 5..7.
    assert [(o, v) for o, v, _ in out] == sorted(
        [(i, v) for i, v in enumerate(FIRST + LOST)] + [(5 + i, v) for i, v in enumerate(NEW)]
    )
    assert {e for o, v, e in out if v in NEW} == {story.epochs["unclean"]}
    last = story.ends[policy][-1]
    (event,) = last["events"]
    assert event["event"] == "truncation"
    assert (event["topic"], event["partition"]) == (topic, 0)
    assert (event["lostFrom"], event["lostUntil"], event["resumeAt"]) == (5, 10, 5)
    assert event["policy"] == policy
    assert "offsets 5..9 (5 records)" in event["message"]
    # The decision is in the end offset, so a replay from the checkpoint starts there.
    assert last["starts"] == {topic: {"0": {"offset": 5, "epoch": 0}}}
    end = last["topics"][topic]["partitions"]["0"]
    assert (end["offset"], end["epoch"]) == (8, story.epochs["unclean"])
    assert end["timestamp"] > 0  # of offset 7, written by the new leader
