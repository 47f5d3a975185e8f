"""Unclean election (opt-in per topic): a replica that fell out of the ISR becomes
leader when every ISR member is gone, at a higher epoch, and takes new writes at
offsets the lost suffix held. The returning old replicas truncate that suffix into
quarantine, and KIP-320 consumers of confluent-kafka and
kafka-python detect the truncation: with no reset policy an error naming the
partition, with `earliest` a move to the divergence offset, from where they read
exactly the new leader's records."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import confluent_kafka as ck
import kafka
import kafka.errors
import pytest
from cluster_harness import Cluster, eventually, running_cluster
from kafka.structs import OffsetAndMetadata

pytestmark = pytest.mark.long

TOPIC = "unclean"
FIRST = [(b"first-%d" % i, b"on every replica") for i in range(5)]
# Written while the lagging replica is out of the ISR: the suffix an unclean election loses.
LOST = [(b"lost-%d" % i, b"only on the old ISR") for i in range(5)]
# Written to the uncleanly elected leader, at the offsets the lost suffix held.
NEW = [(b"new-%d" % i, b"on the unclean leader") for i in range(3)]
DIVERGENCE = len(FIRST)
OLD_END = len(FIRST) + len(LOST)
POLL_BOUND_S = 60.0
SETTINGS = {
    # The lagging replica leaves the ISR by lag (3 s) but stays registered while it is
    # paused (even on a loaded machine: 30 s): a broker whose registration lapsed is
    # missing from the broker list of
    # Metadata answers (its own included, until it registers again), and a
    # kafka-python consumer given such a list forgets that broker for good (it never
    # re-bootstraps), so it could not find the unclean leader.
    "zookeeper.session.timeout.ms": "30000",
}


def kafka_python_consumer(bootstrap: str, reset: str) -> Any:
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset=reset,
        request_timeout_ms=5000,
        reconnect_backoff_max_ms=500,
        # kafka-python never goes back to its bootstrap servers: a metadata refresh
        # while the paused replica's registration has expired would make it forget that
        # broker for good, and with the others dead it could reach nobody. So no
        # periodic refresh (the default 5 minutes); only errors refresh, and the first
        # errors come when the old ISR is killed.
    )
    tp = kafka.TopicPartition(TOPIC, 0)
    consumer.assign([tp])
    consumer.seek(tp, 0)
    return consumer


def kafka_python_read(consumer: Any, count: int) -> list[Any]:
    got: list[Any] = []
    deadline = time.monotonic() + POLL_BOUND_S
    while len(got) < count and time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=500).values():
            got.extend(batch)
    assert len(got) == count, f"kafka-python read {len(got)} of {count}: {got}"
    return got


def confluent_consumer(bootstrap: str, reset: str) -> ck.Consumer:
    return ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "never-joined",
            "enable.auto.commit": False,
            "auto.offset.reset": reset,
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )


def confluent_poll(consumer: ck.Consumer, count: int) -> list[ck.Message]:
    """Messages (records or errors) until ``count`` records or one error."""
    out: list[ck.Message] = []
    deadline = time.monotonic() + POLL_BOUND_S
    while time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        out.append(msg)
        if msg.error() is not None or sum(1 for m in out if m.error() is None) >= count:
            return out
    raise AssertionError(f"confluent-kafka got {len(out)} messages: {out}")


def lagging_replica_paused_out_of_isr(cluster: Cluster, leader: int, lagging: int) -> None:
    cluster.pause(lagging)
    eventually(
        lambda: lagging not in cluster.metadata(TOPIC, via=leader)["partitions"][0].isr,
        60,
        "the paused replica to leave the ISR",
    )


def test_unclean_election_quarantines_lost_suffix_and_consumers_detect_truncation(
    tmp_path: Path, metastore_uri: str
) -> None:
    with running_cluster(tmp_path, metastore_uri, **SETTINGS) as cluster:
        # The lagging replica is not the controller, so the ISR shrink is served at once.
        controller = cluster.controller_id()
        leader, lagging = [b for b in range(3) if b != controller]
        other = controller
        cluster.create_topic(
            TOPIC,
            assignment=[[leader, other, lagging]],
            unclean_leader_election_enable="true",
            min_insync_replicas="1",
        )
        _, old_epoch = cluster.leader(TOPIC)
        assert cluster.produce(leader, TOPIC, FIRST) == (0, 0)
        eventually(
            lambda: cluster.log_end_offset(lagging, TOPIC) == len(FIRST),
            30,
            "every replica to hold the first records",
        )
        # kafka-python consumers read across the whole story (it has no public seek
        # that carries a leader epoch; its position keeps the epoch of what it read).
        kp_none = kafka_python_consumer(cluster.bootstrap, "none")
        kp_earliest = kafka_python_consumer(cluster.bootstrap, "earliest")
        for consumer in (kp_none, kp_earliest):
            assert [r.offset for r in kafka_python_read(consumer, len(FIRST))] == [0, 1, 2, 3, 4]

        lagging_replica_paused_out_of_isr(cluster, leader, lagging)
        assert cluster.produce(leader, TOPIC, LOST) == (0, len(FIRST))
        for consumer in (kp_none, kp_earliest):
            read = kafka_python_read(consumer, len(LOST))
            assert [(r.offset, r.key) for r in read] == [
                (DIVERGENCE + i, k) for i, (k, _) in enumerate(LOST)
            ]
            assert {r.leader_epoch for r in read} == {old_epoch}

        # Every ISR member dies; the lagging replica wakes, the only one left.
        cluster.kill(other)
        cluster.kill(leader)
        cluster.resume(lagging)
        eventually(
            lambda: cluster.metadata(TOPIC, via=lagging)["partitions"][0].leader == lagging,
            120,  # on ZooKeeper the killed brokers' sessions must expire first
            "the lagging replica to be elected uncleanly",
        )
        new_epoch = cluster.metadata(TOPIC, via=lagging)["partitions"][0].leader_epoch
        assert new_epoch > old_epoch
        eventually(
            lambda: cluster.list_offsets(lagging, TOPIC).error == 0,
            30,
            "the unclean leader to serve offsets",
        )
        assert cluster.produce(lagging, TOPIC, NEW) == (0, DIVERGENCE)
        new_end = DIVERGENCE + len(NEW)
        expected_new = [(DIVERGENCE + i, k) for i, (k, _) in enumerate(NEW)]

        # kafka-python: the consumers that read up to the old end notice on their next
        # polls (both polled together, so both learn the new leader at the same time).
        deadline = time.monotonic() + POLL_BOUND_S
        truncation = None
        moved: list[Any] = []
        while (truncation is None or len(moved) < len(NEW)) and time.monotonic() < deadline:
            if truncation is None:
                try:
                    assert kp_none.poll(timeout_ms=200) == {}
                except kafka.errors.LogTruncationError as exc:
                    truncation = exc
            for batch in kp_earliest.poll(timeout_ms=200).values():
                moved.extend(batch)
        assert truncation is not None, "kafka-python (reset none) did not detect truncation"
        assert truncation.divergent_offsets == {
            kafka.TopicPartition(TOPIC, 0): OffsetAndMetadata(DIVERGENCE, "", old_epoch)
        }
        assert [(r.offset, r.key) for r in moved] == expected_new
        kp_earliest.close()
        # The application resumes where the error says the logs diverged.
        kp_none.seek(kafka.TopicPartition(TOPIC, 0), DIVERGENCE)
        read = kafka_python_read(kp_none, len(NEW))
        assert [(r.offset, r.key) for r in read] == expected_new
        kp_none.close()

        # confluent-kafka: a position inside the lost suffix, with the epoch it was read in.
        position = ck.TopicPartition(TOPIC, 0, OLD_END, leader_epoch=old_epoch)
        strict = confluent_consumer(cluster.live_bootstrap(), "error")
        strict.assign([position])
        (err_msg,) = confluent_poll(strict, 1)
        error = err_msg.error()
        # librdkafka 2.16 hands the truncation (its _LOG_TRUNCATION) to the application
        # as the error of the failed reset to INVALID: _AUTO_OFFSET_RESET, whose text
        # carries the detected divergence.
        assert error is not None and error.code() == ck.KafkaError._AUTO_OFFSET_RESET, error
        assert (
            f"Partition log truncation detected at offset {OLD_END} (leader epoch {old_epoch})"
            f": broker end offset is {DIVERGENCE}"
        ) in error.str(), error.str()
        assert (err_msg.topic(), err_msg.partition()) == (TOPIC, 0), str(error)
        strict.close()

        lenient = confluent_consumer(cluster.live_bootstrap(), "earliest")
        lenient.assign([position])
        got = confluent_poll(lenient, len(NEW))
        assert all(m.error() is None for m in got), [str(m.error()) for m in got]
        assert [(m.offset(), m.key()) for m in got] == expected_new
        assert {m.leader_epoch() for m in got} == {new_epoch}
        lenient.close()

        # The old replicas return: they truncate the lost suffix into quarantine.
        cluster.brokers[other].restart()
        cluster.brokers[leader].restart()
        for b in (leader, other):
            eventually(
                lambda b=b: cluster.log_end_offset(b, TOPIC) == new_end,
                60,
                f"broker {b} to follow the unclean leader",
            )
            (kept,) = cluster.quarantined(b, TOPIC)
            assert (kept["first_offset"], kept["last_offset"], kept["epochs"]) == (
                DIVERGENCE,
                OLD_END - 1,
                [old_epoch],
            ), kept
            records = cluster.quarantine_show(kept["file"])
            assert [(r["offset"], r["key"].encode()) for r in records] == [
                (DIVERGENCE + i, k) for i, (k, _) in enumerate(LOST)
            ]
            assert f"{TOPIC}-0: offsets {DIVERGENCE}..{OLD_END - 1} epochs [{old_epoch}]" in (
                cluster.quarantine_list(b)
            )
        assert cluster.quarantined(lagging, TOPIC) == []
        eventually(
            lambda: sorted(cluster.metadata(TOPIC)["partitions"][0].isr) == [0, 1, 2],
            60,
            "the returning replicas to rejoin the ISR",
        )
