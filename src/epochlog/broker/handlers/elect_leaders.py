"""ElectLeaders: move leadership back to preferred replicas (KIP-183). The broker files
the request for the controller and answers once the partitions' new states arrive."""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import ElectLeadersResponse

from epochlog.broker.handlers.context import HandlerContext
from epochlog.protocol.apis import ApiKey, RequestFrame, api
from epochlog.protocol.errors import ErrorCode
from epochlog.security.api_rules import allowed
from epochlog.security.session import Session

API = api(ApiKey.ELECT_LEADERS, 0, 2)

PREFERRED = 0


def _outcome(broker: HandlerContext, topic: str, partition: int) -> tuple[ErrorCode, str | None]:
    meta = broker.metadata_cache.topic(topic)
    state = meta.partitions.get(partition) if meta else None
    if state is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no partition {topic}-{partition}"
    if state.leader == state.replicas[0]:
        return ErrorCode.NONE, None
    return (
        ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
        f"replica {state.replicas[0]} is not alive and in sync",
    )


async def handle(
    broker: HandlerContext, request: Any, version: int, frame: RequestFrame, session: Session
) -> Any:
    election_type = request.election_type if version >= 1 else PREFERRED
    may = allowed(broker.authorizer, session, ApiKey.ELECT_LEADERS, "cluster")
    if request.topic_partitions is None:
        # All partitions: a refused principal is not told which there are.
        topics = broker.metadata_cache.topics() if may else []
        wanted = [(t.name, p) for t in topics for p in sorted(t.partitions)]
    else:
        wanted = [(t.topic, p) for t in request.topic_partitions for p in t.partitions]
    top_error = ErrorCode.NONE
    if not may:
        # Kafka's answer: the request's error and every partition named's.
        top_error = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        results = {key: (top_error, "ALTER on the cluster is not allowed") for key in wanted}
    elif election_type != PREFERRED:
        # Unclean elections follow the topic setting: enable it with
        # IncrementalAlterConfigs and the controller elects a live replica itself.
        results = {
            key: (ErrorCode.INVALID_REQUEST, "use unclean.leader.election.enable") for key in wanted
        }
    else:
        already = {key for key in wanted if _outcome(broker, *key)[0] == ErrorCode.NONE}
        if len(already) < len(wanted):
            await broker.cluster.request_preferred_election()
            await broker.cluster.wait_for_state(
                lambda: all(_outcome(broker, *key)[0] == ErrorCode.NONE for key in wanted),
                max(0, request.timeout_ms) / 1000,
            )
        results = {
            key: (ErrorCode.ELECTION_NOT_NEEDED, None) if key in already else _outcome(broker, *key)
            for key in wanted
        }
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), (code, message) in results.items():
        by_topic.setdefault(topic, []).append(
            ElectLeadersResponse.ReplicaElectionResult.PartitionResult(
                partition_id=partition, error_code=code, error_message=message
            )
        )
    return ElectLeadersResponse(
        throttle_time_ms=0,
        error_code=top_error,
        replica_election_results=[
            ElectLeadersResponse.ReplicaElectionResult(topic=topic, partition_result=parts)
            for topic, parts in by_topic.items()
        ],
    )
