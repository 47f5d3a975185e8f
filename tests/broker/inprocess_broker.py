"""An in-process broker on a loopback port and a raw protocol connection to it."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.producer import ProduceRequest

from epochlog.broker.broker import Broker
from epochlog.broker.config import BrokerConfig
from epochlog.client.connection import BrokerConnection
from epochlog.protocol.records import build_batch
from epochlog.seams import real_seams


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
    request = MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=name, topic_id=None)],
        allow_auto_topic_creation=True,
        include_topic_authorized_operations=False,
    )
    return await conn.send(request, 12)


def batch(values: list[bytes], timestamp: int = 1_700_000_000_000, **kwargs: Any) -> bytes:
    return build_batch([(None, v, [], timestamp + i) for i, v in enumerate(values)], **kwargs)


async def produce(
    conn: BrokerConnection, topic: str, records: bytes, partition: int = 0, acks: int = -1
) -> Any:
    request = ProduceRequest(
        transactional_id=None,
        acks=acks,
        timeout_ms=5000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name=topic,
                partition_data=[
                    ProduceRequest.TopicProduceData.PartitionProduceData(
                        index=partition, records=records
                    )
                ],
            )
        ],
    )
    response = await conn.send(request, 9, expect_response=acks != 0)
    if response is None:
        return None
    return response.responses[0].partition_responses[0]
