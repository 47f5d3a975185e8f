"""A follower crashes and one batch in the first of its segments is damaged while it is
down: recovery keeps every later segment and makes the damaged batch a hole, its fetcher
fills the hole from the leader in place, and its log ends up byte for byte the leader's
(once, one corrupt batch used to cut everything after it, 16,950 acknowledged
records of three intact segments). A consumer reading from it, once it leads, gets
every record exactly once."""

from __future__ import annotations

import hashlib
from pathlib import Path

from cluster_harness import eventually, running_cluster

from epochlog.protocol.batch import HEADER_SIZE
from support.clients import confluent_consume, confluent_producer
from support.segments import batch_spans, flip_bytes, segment_files

TOPIC = "repaired"
RECORDS = 3000
FOLLOWER = 2


def _isr(cluster) -> list[int]:
    return list(cluster.metadata(TOPIC)["partitions"][0].isr)


def _batches(log_dir: Path) -> list[bytes]:
    """Every batch of the partition on one broker, as its bytes on disk."""
    out = []
    for path in segment_files(log_dir, TOPIC):
        data = path.read_bytes()
        out += [data[s.position : s.position + s.size] for s in batch_spans(path)]
    return out


def _identities(paths: list[Path]) -> dict[str, tuple[int, str]]:
    """Each file's inode and contents' digest: the same file, never re-created."""
    return {p.name: (p.stat().st_ino, hashlib.sha256(p.read_bytes()).hexdigest()) for p in paths}


def test_follower_repairs_a_damaged_batch_in_its_first_segment_from_the_leader(
    tmp_path: Path,
) -> None:
    metastore = f"sqlite://{tmp_path / 'metastore.db'}"
    settings = {
        "auto.leader.rebalance.enable": "false",
        # No recovery-point checkpoint before the crash: recovery re-validates every
        # segment, the first one included, as after the crash the issue describes.
        "log.flush.offset.checkpoint.interval.ms": "3600000",
    }
    with running_cluster(tmp_path, metastore, **settings) as cluster:
        cluster.create_topic(
            TOPIC, assignment=[[0, 1, 2]], min_insync_replicas="2", segment_bytes="16384"
        )
        producer = confluent_producer(cluster.bootstrap, **{"linger.ms": 5, "batch.size": 2048})
        for i in range(RECORDS):
            producer.produce(TOPIC, key=b"k%d" % i, value=b"value-%d" % i)
        assert producer.flush(60) == 0
        eventually(
            lambda: cluster.log_end_offset(FOLLOWER, TOPIC) == RECORDS, 60, "follower caught up"
        )

        cluster.kill(FOLLOWER)
        log_dir = cluster.brokers[FOLLOWER].log_dir
        segments = segment_files(log_dir, TOPIC)
        assert len(segments) >= 4
        first, later = segments[0], segments[1:]
        later_before = _identities(later)
        spans = batch_spans(first)
        victim = spans[len(spans) // 2]
        flip_bytes(first, victim.position + HEADER_SIZE + 5, 4)

        cluster.brokers[FOLLOWER].start()
        cluster.wait_for_brokers()
        eventually(lambda: FOLLOWER in _isr(cluster), 60, "the follower back in the ISR")
        leader_dir = cluster.brokers[0].log_dir
        eventually(
            lambda: _batches(log_dir) == _batches(leader_dir),
            60,
            "the follower's log byte for byte the leader's",
        )

        # Only the damaged bytes went to quarantine; every later segment stayed as it was
        # (the same files: re-fetched ones would be new files with the same bytes).
        kept = cluster.quarantined(FOLLOWER, TOPIC)
        assert sum(q["size"] for q in kept) == victim.size, kept
        assert [p.name for p in segment_files(log_dir, TOPIC)] == [p.name for p in segments]
        assert _identities(later) == later_before
        (kept,) = cluster.quarantined(FOLLOWER, TOPIC)
        assert kept.get("hole") is True and kept["size"] == victim.size
        assert kept["first_offset"] == victim.base_offset and "CRC" in kept["reason"]
        assert "filled in place from a replica" in cluster.brokers[FOLLOWER].tail(400)

        # Fail over to the repaired follower: it serves every record exactly once.
        cluster.kill(0)
        cluster.kill(1)
        eventually(lambda: cluster.leader(TOPIC)[0] == FOLLOWER, 60, "the follower leads")
        got = confluent_consume(cluster.live_bootstrap(), TOPIC, RECORDS)
        assert [g.offset for g in got] == list(range(RECORDS))
        assert [g.value for g in got] == [b"value-%d" % i for i in range(RECORDS)]
