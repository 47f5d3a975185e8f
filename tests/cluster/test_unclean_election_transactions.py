"""Transactions across an unclean election (KIP-320's case): a committed transaction whose
commit marker (and last records) only the old ISR held, an open transaction only they
held, and one committed everywhere. The uncleanly elected leader aborts the transaction
it holds half of, so read_committed readers (confluent-kafka, kafka-python, epochlog's)
never see a half-truncated transaction; the returning brokers keep what they cut, the
markers included, in quarantine; a late commit marker from the coordinator is refused."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import confluent_kafka as ck
import kafka
import pytest
from cluster_harness import Cluster, eventually, produce_answer, running_cluster
from kafka.protocol.producer import ProduceRequest, WriteTxnMarkersRequest

from epochlog.client import Consumer, TopicPartition
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.records import build_batch

pytestmark = pytest.mark.long

TOPIC = "unclean-txn"
# The test writes transactional batches and their markers as a coordinator would, with
# no coordinator to verify them (KIP-890): verification is off.
SETTINGS = {
    "zookeeper.session.timeout.ms": "30000",
    "transaction.partition.verification.enable": "false",
}
COMMITTED, HALF, OPEN = 1001, 1002, 1003
BOUND_S = 60.0


def txn_produce(cluster: Cluster, broker: int, pid: int, seq: int, values: list[bytes]) -> int:
    batch = build_batch(
        [(None, v, [], None) for v in values],
        producer_id=pid,
        producer_epoch=0,
        base_sequence=seq,
        is_transactional=True,
        now_ms=int(time.time() * 1000),
    )
    request = ProduceRequest(
        transactional_id="test-coordinator",
        acks=1,
        timeout_ms=10_000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name=TOPIC,
                partition_data=[
                    ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=batch)
                ],
            )
        ],
    )
    code, offset = produce_answer(cluster.send(broker, request, 9))
    assert code == 0, ErrorCode(code)
    return offset


def write_marker(cluster: Cluster, broker: int, pid: int, commit: bool, epoch: int = 0) -> int:
    """WriteTxnMarkers as the transaction coordinator would send it."""
    marker = WriteTxnMarkersRequest.WritableTxnMarker
    request = WriteTxnMarkersRequest(
        markers=[
            marker(
                producer_id=pid,
                producer_epoch=epoch,
                transaction_result=commit,
                topics=[marker.WritableTxnMarkerTopic(name=TOPIC, partition_indexes=[0])],
                coordinator_epoch=0,
            )
        ]
    )
    response = cluster.send(broker, request, 1)
    return int(response.markers[0].topics[0].partitions[0].error_code)


def read_committed_everywhere(bootstrap: str, kafka_python: bool = True) -> dict[str, list[bytes]]:
    """What each client's read_committed consumer reads of the whole partition
    (kafka-python never re-bootstraps: not while a broker it was told of is paused)."""
    out: dict[str, list[bytes]] = {}
    ckc = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"r-{time.monotonic_ns()}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    try:
        ckc.assign([ck.TopicPartition(TOPIC, 0, ck.OFFSET_BEGINNING)])
        out["confluent-kafka"] = _drain(lambda: [m.value() for m in ckc.consume(100, 0.5)])
    finally:
        ckc.close()
    if kafka_python:
        kpc = kafka.KafkaConsumer(
            bootstrap_servers=bootstrap, group_id=None, isolation_level="read_committed"
        )
        try:
            tp = kafka.TopicPartition(TOPIC, 0)
            kpc.assign([tp])
            kpc.seek_to_beginning(tp)
            out["kafka-python"] = _drain(
                lambda: [r.value for rs in kpc.poll(timeout_ms=500).values() for r in rs]
            )
        finally:
            kpc.close()
    elc = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    try:
        elc.assign([TopicPartition(TOPIC, 0)])
        out["epochlog"] = _drain(lambda: [r.value for r in elc.poll(0.5)])
    finally:
        elc.close()
    return out


def _drain(poll: Any) -> list[bytes]:
    got: list[bytes] = []
    idle = 0
    deadline = time.monotonic() + BOUND_S
    while idle < 4 and time.monotonic() < deadline:
        values = poll()
        got.extend(values)
        idle = 0 if values else idle + 1
    return got


def test_read_committed_readers_never_see_a_half_truncated_transaction(
    tmp_path: Path, metastore_uri: str
) -> None:
    with running_cluster(tmp_path, metastore_uri, **SETTINGS) as cluster:
        controller = cluster.controller_id()
        leader, lagging = [b for b in range(3) if b != controller]
        other = controller
        cluster.create_topic(
            TOPIC,
            assignment=[[leader, other, lagging]],
            unclean_leader_election_enable="true",
            min_insync_replicas="1",
        )
        # Committed everywhere: a0 a1 + commit (offsets 0-2); the first half of HALF.
        txn_produce(cluster, leader, COMMITTED, 0, [b"a0", b"a1"])
        assert write_marker(cluster, leader, COMMITTED, True) == 0
        txn_produce(cluster, leader, HALF, 0, [b"b0"])  # offset 3
        eventually(lambda: cluster.log_end_offset(lagging, TOPIC) == 4, 30, "the lagging copy at 4")
        cluster.pause(lagging)
        eventually(
            lambda: lagging not in cluster.metadata(TOPIC, via=leader)["partitions"][0].isr,
            60,
            "the paused replica to leave the ISR",
        )
        # Only the old ISR gets the rest of HALF with its commit, and OPEN.
        txn_produce(cluster, leader, HALF, 1, [b"b1"])
        assert write_marker(cluster, leader, HALF, True) == 0
        txn_produce(cluster, leader, OPEN, 0, [b"c0"])
        before = read_committed_everywhere(cluster.live_bootstrap(), kafka_python=False)
        assert set(map(tuple, before.values())) == {(b"a0", b"a1", b"b0", b"b1")}, before

        cluster.kill(leader)
        cluster.kill(other)
        cluster.resume(lagging)
        eventually(lambda: cluster.leader(TOPIC)[0] == lagging, 60, "the unclean election")
        after = read_committed_everywhere(cluster.brokers[lagging].bootstrap)
        for client, values in after.items():
            assert values == [b"a0", b"a1"], (client, values)
        # The coordinator's commit of HALF, sent again to the new leader, is refused: the
        # leader fenced that epoch when it aborted the half it holds.
        refused = write_marker(cluster, lagging, HALF, True)
        assert refused == ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode(refused)

        cluster.brokers[leader].restart()
        cluster.brokers[other].restart()
        eventually(
            lambda: cluster.log_end_offset(leader, TOPIC) == cluster.log_end_offset(lagging, TOPIC),
            60,
            "the old leader to truncate and follow",
        )
        # b1 (4), HALF's commit marker (5) and c0 (6) were cut and kept aside.
        kept = cluster.quarantined(leader, TOPIC)
        assert any(e["first_offset"] == 4 and e["last_offset"] == 6 for e in kept), kept
        final = read_committed_everywhere(cluster.bootstrap)
        for client, values in final.items():
            assert values == [b"a0", b"a1"], (client, values)
