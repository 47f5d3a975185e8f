"""An in-process broker on a loopback port and a raw protocol connection to it."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from kafka.protocol.admin import DeleteTopicsRequest
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest

from epochlog.broker.broker import Broker
from epochlog.broker.config import BrokerConfig
from epochlog.client.connection import BrokerConnection
from epochlog.protocol.records import build_batch
from epochlog.seams.real import real_seams
from support.requests import produce_request


def broker_config(log_dir: Path, **overrides: str) -> BrokerConfig:
    props = {
        "broker.id": "0",
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "log.dirs": str(log_dir),
    }
    props.update({k.replace("_", "."): v for k, v in overrides.items()})
    return BrokerConfig.from_mapping(props)


@asynccontextmanager
async def running_broker(log_dir: Path, **overrides: str):
    broker = Broker(broker_config(log_dir, **overrides), real_seams(seed=1))
    await broker.start()
    try:
        yield broker
    finally:
        await broker.stop()


async def connect(broker: Broker) -> BrokerConnection:
    return await BrokerConnection.open(broker.seams.network, "127.0.0.1", broker.port)


def run(scenario: Callable[[], Awaitable[Any]]) -> Any:
    return asyncio.run(asyncio.wait_for(scenario(), 60))


async def create_topic_via_metadata(conn: BrokerConnection, name: str) -> Any:
    return await conn.send(metadata_request(name), 12)


async def delete_topic(conn: BrokerConnection, name: str) -> int:
    """DeleteTopics v6 by name; the topic's error code."""
    request = DeleteTopicsRequest(
        topics=[DeleteTopicsRequest.DeleteTopicState(name=name, topic_id=uuid.UUID(int=0))],
        timeout_ms=5000,
    )
    return int((await conn.send(request, 6)).responses[0].error_code)


def batch(values: list[bytes], timestamp: int = 1_700_000_000_000, **kwargs: Any) -> bytes:
    return build_batch([(None, v, [], timestamp + i) for i, v in enumerate(values)], **kwargs)


def valid_request_frames() -> list[bytes]:
    """Encoded requests (header and body, no size prefix) for topic "t" partition 0."""
    requests = [
        (produce_request("t", batch([b"v"])), 9),
        (metadata_request("t"), 12),
        (ApiVersionsRequest(client_software_name="fuzz", client_software_version="1"), 3),
        (
            ListOffsetsRequest(
                replica_id=-1,
                isolation_level=0,
                topics=[
                    ListOffsetsRequest.ListOffsetsTopic(
                        name="t",
                        partitions=[
                            ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
                                partition_index=0, current_leader_epoch=-1, timestamp=-1
                            )
                        ],
                    )
                ],
            ),
            7,
        ),
    ]
    frames = []
    for request, version in requests:
        request.with_header(correlation_id=1, client_id="fuzz")
        frames.append(bytes(request.encode(version=version, header=True)))
    return frames


def metadata_request(name: str) -> Any:
    return MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=name, topic_id=None)],
        allow_auto_topic_creation=True,
        include_topic_authorized_operations=False,
    )


async def produce(
    conn: BrokerConnection, topic: str, records: bytes, partition: int = 0, acks: int = -1
) -> Any:
    response = await conn.send(
        produce_request(topic, records, partition, acks), 9, expect_response=acks != 0
    )
    if response is None:
        return None
    return response.responses[0].partition_responses[0]


def long_poll_fetch_request(topic: str, max_wait_ms: int) -> FetchRequest:
    """A Fetch (v4 and up) of partition 0 of ``topic`` from offset 0 that waits up to
    ``max_wait_ms`` for a first byte."""
    partition = FetchRequest.FetchTopic.FetchPartition(
        partition=0,
        fetch_offset=0,
        log_start_offset=-1,
        partition_max_bytes=1 << 20,
        current_leader_epoch=-1,
    )
    return FetchRequest(
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        topics=[FetchRequest.FetchTopic(topic=topic, partitions=[partition])],
    )
