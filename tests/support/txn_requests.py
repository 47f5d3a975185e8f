"""A transactional producer's requests sent raw, past any client, so a test can write
what no client would: a batch under another transactional id's producer id, or to a
partition never added to the transaction (what leaves a transaction hanging);
and what a read_committed reader then gets."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import confluent_kafka as ck
from kafka.protocol.consumer import ListOffsetsRequest
from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.protocol.producer import AddPartitionsToTxnRequest, InitProducerIdRequest

from epochlog.client.connection import BrokerConnection
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.records import build_batch
from epochlog.seams.real import SocketNetwork
from support.requests import REQUEST_BOUND_S, produce_request

READ_UNCOMMITTED, READ_COMMITTED = 0, 1
# A hang guard for a client's whole call, never a judgement of speed.
BOUND_S = 60.0
_RETRIED = {
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.NOT_COORDINATOR,
    ErrorCode.CONCURRENT_TRANSACTIONS,
}


async def connect(port: int) -> BrokerConnection:
    return await asyncio.wait_for(
        BrokerConnection.open(SocketNetwork(), "127.0.0.1", port), REQUEST_BOUND_S
    )


async def send(conn: BrokerConnection, request: Any, version: int) -> Any:
    return await asyncio.wait_for(conn.send(request, version), REQUEST_BOUND_S)


async def init_producer(
    conn: BrokerConnection, tid: str, timeout_ms: int = 300_000
) -> tuple[int, int]:
    """FindCoordinator (which creates __transaction_state) then InitProducerId, each
    retried while the coordinator loads: the transactional id's (producer id, epoch)."""
    find = FindCoordinatorRequest(key=tid, key_type=1)
    init = InitProducerIdRequest(
        transactional_id=tid, transaction_timeout_ms=timeout_ms, producer_id=-1, producer_epoch=-1
    )
    deadline = time.monotonic() + REQUEST_BOUND_S
    while time.monotonic() < deadline:
        if (await send(conn, find, 3)).error_code == ErrorCode.NONE:
            answer = await send(conn, init, 4)
            if answer.error_code == ErrorCode.NONE:
                return answer.producer_id, answer.producer_epoch
            assert answer.error_code in _RETRIED, ErrorCode(answer.error_code)
        await asyncio.sleep(0.1)
    raise AssertionError(f"no producer id for {tid} in {REQUEST_BOUND_S} s")


async def add_partitions(
    conn: BrokerConnection, tid: str, pid: int, epoch: int, topic: str, parts: list[int]
) -> None:
    """AddPartitionsToTxn v3, as producers send it; every partition must be added."""
    request = AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=tid,
        v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[
            AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=topic, partitions=parts)
        ],
    )
    answer = await send(conn, request, 3)
    codes = {
        p.partition_error_code
        for t in answer.results_by_topic_v3_and_below
        for p in t.results_by_partition
    }
    assert codes == {ErrorCode.NONE}, codes


def txn_batch(
    pid: int, epoch: int, values: list[bytes], seq: int = 0, timestamp_ms: int | None = None
) -> bytes:
    """A transactional batch, its records stamped ``timestamp_ms`` (now by default)."""
    now = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    return build_batch(
        [(None, v, [], now) for v in values],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=True,
    )


async def produce(
    conn: BrokerConnection,
    tid: str | None,
    topic: str,
    partition: int,
    records: bytes,
    timeout_ms: int = 5000,
) -> Any:
    """Produce v9, acks=all, under ``tid``: the partition's answer."""
    request = produce_request(topic, records, partition, timeout_ms=timeout_ms)
    request.transactional_id = tid
    answer = await send(conn, request, 9)
    return answer.responses[0].partition_responses[0]


async def latest_offset(conn: BrokerConnection, topic: str, partition: int, isolation: int) -> int:
    """ListOffsets latest: the high watermark, or under read_committed the last stable
    offset."""
    request = ListOffsetsRequest(
        replica_id=-1,
        isolation_level=isolation,
        topics=[
            ListOffsetsRequest.ListOffsetsTopic(
                name=topic,
                partitions=[
                    ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
                        partition_index=partition, current_leader_epoch=-1, timestamp=-1
                    )
                ],
            )
        ],
    )
    [answer] = (await send(conn, request, 7)).topics[0].partitions
    assert answer.error_code == ErrorCode.NONE, ErrorCode(answer.error_code)
    return int(answer.offset)


def read_committed(
    bootstrap: str, topic: str, partition: int, isolation: str = "read_committed"
) -> list[bytes]:
    """What a read_committed (or ``isolation``) confluent-kafka consumer reads."""
    consumer = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
        }
    )
    try:
        consumer.assign([ck.TopicPartition(topic, partition, ck.OFFSET_BEGINNING)])
        got: list[bytes] = []
        idle = 0
        deadline = time.monotonic() + BOUND_S
        while idle < 4 and time.monotonic() < deadline:
            batch = [m for m in consumer.consume(100, 0.5) if m.error() is None]
            got.extend(m.value() for m in batch)
            idle = 0 if batch else idle + 1
        return got
    finally:
        consumer.close()
