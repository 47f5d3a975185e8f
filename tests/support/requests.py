"""Raw requests the tests send past any client, to pin what the broker answers."""

from __future__ import annotations

import asyncio
from typing import Any

from kafka.protocol.admin import DescribeConfigsRequest, IncrementalAlterConfigsRequest
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.producer import ProduceRequest

from epochlog.client.connection import BrokerConnection
from epochlog.seams.real import SocketNetwork

# A bound on one request to one broker: a hang guard, never a judgement of speed.
REQUEST_BOUND_S = 30.0
BROKER_RESOURCE = 4


async def send_request(port: int, request: Any, version: int) -> Any:
    conn = await asyncio.wait_for(
        BrokerConnection.open(SocketNetwork(), "127.0.0.1", port), REQUEST_BOUND_S
    )
    try:
        return await asyncio.wait_for(conn.send(request, version), REQUEST_BOUND_S)
    finally:
        await conn.close()


def fetch_request(
    topic: str,
    offset: int,
    *,
    partition: int = 0,
    replica_id: int = -1,
    current_epoch: int = -1,
    last_epoch: int = -1,
    max_wait_ms: int = 0,
    min_bytes: int = 1,
    rack_id: str = "",
) -> FetchRequest:
    """A sessionless Fetch of one partition: a consumer's, or with ``replica_id`` a
    follower's; the epochs are KIP-320's CurrentLeaderEpoch and LastFetchedEpoch."""
    return FetchRequest(
        replica_id=replica_id,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            FetchRequest.FetchTopic(
                topic=topic,
                partitions=[
                    FetchRequest.FetchTopic.FetchPartition(
                        partition=partition,
                        current_leader_epoch=current_epoch,
                        fetch_offset=offset,
                        last_fetched_epoch=last_epoch,
                        log_start_offset=-1,
                        partition_max_bytes=1 << 20,
                    )
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id=rack_id,
    )


def produce_request(
    topic: str, records: bytes, partition: int = 0, acks: int = -1, timeout_ms: int = 5000
) -> Any:
    """A Produce of ``records`` (already a record set) to one partition."""
    return ProduceRequest(
        transactional_id=None,
        acks=acks,
        timeout_ms=timeout_ms,
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


def alter_broker_configs(port: int, name: str, changes: dict[str, tuple[int, str | None]]) -> Any:
    """IncrementalAlterConfigs v1 of one broker resource (``name``: a broker id, or
    empty for the cluster-wide default, which kafka-configs.sh --entity-default sends
    and neither librdkafka nor kafka-python can name): its one result."""
    Resource = IncrementalAlterConfigsRequest.AlterConfigsResource
    request = IncrementalAlterConfigsRequest(
        resources=[
            Resource(
                resource_type=BROKER_RESOURCE,
                resource_name=name,
                configs=[
                    Resource.AlterableConfig(name=n, config_operation=op, value=v)
                    for n, (op, v) in changes.items()
                ],
            )
        ],
        validate_only=False,
    )
    return asyncio.run(send_request(port, request, 1)).responses[0]


def describe_broker_configs(port: int, name: str) -> dict[str, tuple[str | None, int]]:
    """DescribeConfigs v4 of one broker resource: (value, source) by setting."""
    request = DescribeConfigsRequest(
        resources=[
            DescribeConfigsRequest.DescribeConfigsResource(
                resource_type=BROKER_RESOURCE, resource_name=name, configuration_keys=None
            )
        ],
        include_synonyms=False,
        include_documentation=False,
    )
    [result] = asyncio.run(send_request(port, request, 4)).results
    assert result.error_code == 0, result
    return {c.name: (c.value, c.config_source) for c in result.configs}
