"""DescribeCluster (KIP-700): the cluster ID, the controller and every broker as reached
on the request's listener, without the topic metadata a Metadata request carries; and
when asked, what the principal may do to the cluster (its authorized operations)."""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import DescribeClusterResponse

from epochlog.broker.handlers.context import HandlerContext
from epochlog.broker.responses import endpoints_on_listener
from epochlog.protocol.apis import ApiKey, RequestFrame, api
from epochlog.protocol.errors import ErrorCode
from epochlog.security.acls import ResourceType
from epochlog.security.api_rules import authorized_operations, refusal
from epochlog.security.session import Session

API = api(ApiKey.DESCRIBE_CLUSTER, 0, 1)

BROKERS_ENDPOINT = 1  # EndpointType: brokers (2 would be KRaft controllers)


async def handle(
    broker: HandlerContext, request: Any, version: int, frame: RequestFrame, session: Session
) -> Any:
    if version >= 1 and request.endpoint_type != BROKERS_ENDPOINT:
        return DescribeClusterResponse(
            throttle_time_ms=0,
            error_code=ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
            error_message="only broker endpoints are served (there are no KRaft controllers)",
            endpoint_type=request.endpoint_type,
            cluster_id="",
            controller_id=-1,
            brokers=[],
        )
    refused = refusal(broker.authorizer, session, ApiKey.DESCRIBE_CLUSTER, "cluster")
    if refused != ErrorCode.NONE:
        return DescribeClusterResponse(
            throttle_time_ms=0,
            error_code=refused,
            error_message="DESCRIBE on the cluster is needed",
            endpoint_type=BROKERS_ENDPOINT,
            cluster_id="",
            controller_id=-1,
            brokers=[],
        )
    cache = broker.metadata_cache
    operations = (
        authorized_operations(broker.authorizer, session, ResourceType.CLUSTER)
        if request.include_cluster_authorized_operations
        else None
    )
    return DescribeClusterResponse(
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        error_message=None,
        endpoint_type=BROKERS_ENDPOINT,
        cluster_id=cache.cluster_id,
        controller_id=cache.controller_id,
        brokers=[
            DescribeClusterResponse.DescribeClusterBroker(
                broker_id=b.node_id, host=b.host, port=b.port, rack=b.rack
            )
            for b in sorted(
                endpoints_on_listener(broker, session.listener), key=lambda b: b.node_id
            )
        ],
        authorized_operations=operations,
    )
