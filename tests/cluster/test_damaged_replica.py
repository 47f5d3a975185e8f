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


def _isr(cluster, via: int | None = None, topic: str = TOPIC) -> list[int]:
    return list(cluster.metadata(topic, via)["partitions"][0].isr)


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


def _replica_batches(cluster, broker: int) -> list[bytes]:
    """A replica's batches as stored, oldest first."""
    out = []
    for segment in segment_files(cluster.brokers[broker].log_dir, ROLLING):
        data = segment.read_bytes()
        out += [data[s.position : s.position + s.size] for s in batch_spans(segment)]
    return out


ROLLING = "damaged-rolling"


def test_a_damaged_replica_left_alone_in_the_isr_costs_no_acknowledged_record(
    tmp_path: Path,
) -> None:
    """RF=3, min.insync.replicas=2, 600 records acknowledged by all, a clean shutdown,
    one flipped byte in the batch of offsets 120..122 of one replica's old segment. The
    two intact brokers restart in turn, leaving the damaged one alone in the ISR as
    leader when a read finds the damage: it refuses that read (it does not cut, so the
    others never truncate to it), hands leadership over once they are back in sync,
    and fills its hole from them. On main the high watermark fell to 120 and every
    replica truncated 480 acknowledged records."""
    metastore = f"sqlite://{tmp_path / 'metastore.db'}"
    with running_cluster(
        tmp_path, metastore, **{"auto.leader.rebalance.enable": "false"}
    ) as cluster:
        cluster.create_topic(
            ROLLING, assignment=[[1, 0, 2]], min_insync_replicas="2", segment_bytes="8192"
        )
        producer = confluent_producer(cluster.bootstrap, **{"acks": "all"})
        for i in range(200):
            for j in range(3):
                producer.produce(ROLLING, key=b"k%d" % (3 * i + j), value=b"value-%d" % (3 * i + j))
            assert producer.flush(60) == 0  # one batch of 3 each
        for broker in (0, 2):
            eventually(
                lambda b=broker: cluster.log_end_offset(b, ROLLING) == 600, 60, "replicas caught up"
            )
        intact = _replica_batches(cluster, 0)
        for broker in cluster.brokers:
            broker.stop()
        segment, victim = next(
            (s, span)
            for s in segment_files(cluster.brokers[1].log_dir, ROLLING)
            for span in batch_spans(s)
            if span.base_offset == 120
        )
        assert segment != segment_files(cluster.brokers[1].log_dir, ROLLING)[-1]
        flip_bytes(segment, victim.position + HEADER_SIZE + 5, 1)
        for broker in cluster.brokers:
            broker.start()
        cluster.wait_for_brokers()
        eventually(lambda: sorted(_isr(cluster, topic=ROLLING)) == [0, 1, 2], 60, "all in the ISR")
        admin = cluster.admin()
        admin.elect_leaders(ck.ElectionType.PREFERRED, [ck.TopicPartition(ROLLING, 0)]).result(60)
        eventually(lambda: cluster.leader(ROLLING)[0] == 1, 60, "broker 1 leading")

        # A rolling restart of the intact brokers: broker 1 is alone in the ISR while a
        # read reaches the damage; it serves what precedes it and nothing of it.
        for broker in (0, 2):
            cluster.brokers[broker].stop()
        eventually(
            lambda: _isr(cluster, via=1, topic=ROLLING) == [1], 60, "broker 1 alone in the ISR"
        )
        reader = ck.Consumer({"bootstrap.servers": cluster.brokers[1].bootstrap, "group.id": "x"})
        try:
            reader.assign([ck.TopicPartition(ROLLING, 0, 0)])
            early = [m.offset() for m in reader.consume(600, 5.0) if m.error() is None]
        finally:
            reader.close()
        assert early == list(range(120))
        for broker in (0, 2):
            cluster.brokers[broker].start()
        cluster.wait_for_brokers()

        got = confluent_consume(cluster.bootstrap, ROLLING, 600)
        assert [g.offset for g in got] == list(range(600))
        assert [g.value for g in got] == [b"value-%d" % i for i in range(600)]
        assert cluster.leader(ROLLING)[0] != 1
        eventually(
            lambda: all(_replica_batches(cluster, b) == intact for b in (0, 1, 2)),
            60,
            "every replica holds every batch, broker 1's hole filled in place",
        )
        for broker in (0, 2):
            assert cluster.quarantined(broker, ROLLING) == []  # nobody truncated
        (hole,) = cluster.quarantined(1, ROLLING)
        assert hole["hole"] and (hole["first_offset"], hole["last_offset"]) == (120, 122)
        eventually(
            lambda: sorted(_isr(cluster, topic=ROLLING)) == [0, 1, 2], 60, "broker 1 back in sync"
        )
