"""A replicated partition loses nothing to a damaged disk: the leader whose segment was
damaged while it was down (after a clean shutdown, so nothing re-validates it at
startup) finds the damage the first time a consumer's read reaches it, never serves it,
hands leadership to an in-sync replica, and fetches the cut range back as a follower."""

from __future__ import annotations

from pathlib import Path

import confluent_kafka as ck
from cluster_harness import eventually, running_cluster

from epochlog.protocol.batch import HEADER_SIZE
from support.clients import confluent_consume, confluent_producer
from support.segments import batch_spans, flip_bytes, segment_files

TOPIC = "damaged"
RECORDS = 3000


def _isr(cluster, via: int | None = None) -> list[int]:
    return list(cluster.metadata(TOPIC, via)["partitions"][0].isr)


def test_leader_damaged_below_its_high_watermark_hands_over_and_nothing_is_lost(
    tmp_path: Path,
) -> None:
    metastore = f"sqlite://{tmp_path / 'metastore.db'}"
    with running_cluster(
        tmp_path, metastore, **{"auto.leader.rebalance.enable": "false"}
    ) as cluster:
        cluster.create_topic(TOPIC, assignment=[[0, 1, 2]], min_insync_replicas="2")
        producer = confluent_producer(cluster.bootstrap, **{"linger.ms": 5, "batch.size": 4096})
        for i in range(RECORDS):
            producer.produce(TOPIC, key=b"k%d" % i, value=b"value-%d" % i)
        assert producer.flush(60) == 0
        eventually(lambda: cluster.log_end_offset(2, TOPIC) == RECORDS, 60, "replicas caught up")

        # Broker 0 stops cleanly (its data is trusted at startup), and one batch in the
        # middle of its log is damaged while it is down.
        cluster.brokers[0].stop()
        segment = segment_files(cluster.brokers[0].log_dir, TOPIC)[0]
        spans = batch_spans(segment)
        victim = spans[len(spans) // 2]
        flip_bytes(segment, victim.position + HEADER_SIZE + 5, 4)
        cluster.brokers[0].start()
        cluster.wait_for_brokers()
        eventually(lambda: 0 in _isr(cluster), 60, "broker 0 back in the ISR")
        admin = cluster.admin()
        futures = admin.elect_leaders(ck.ElectionType.PREFERRED, [ck.TopicPartition(TOPIC, 0)])
        futures.result(60)
        eventually(lambda: cluster.leader(TOPIC)[0] == 0, 60, "broker 0 leading again")
        _, epoch_before = cluster.leader(TOPIC)

        # Read everything: the damaged batch is found, never served, and the read goes on
        # at the replica that takes over.
        got = confluent_consume(cluster.bootstrap, TOPIC, RECORDS)
        assert [g.value for g in got] == [b"value-%d" % i for i in range(RECORDS)]
        assert [g.offset for g in got] == list(range(RECORDS))
        leader, epoch = cluster.leader(TOPIC)
        assert leader != 0 and epoch > epoch_before

        cut = [q for q in cluster.quarantined(0, TOPIC) if "damaged" in q["file"]]
        assert len(cut) == 1 and cut[0]["first_offset"] == victim.base_offset
        assert "CRC" in cut[0]["reason"]
        assert "resign leadership (damaged log)" in cluster.brokers[0].tail(400)
        # Broker 0 fetched the range back and is in sync again.
        eventually(
            lambda: cluster.log_end_offset(0, TOPIC) == RECORDS and 0 in _isr(cluster),
            60,
            "broker 0 caught up and back in the ISR",
        )
        producer.produce(TOPIC, value=b"after")
        assert producer.flush(60) == 0
