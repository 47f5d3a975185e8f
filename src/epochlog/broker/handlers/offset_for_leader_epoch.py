"""OffsetsForLeaderEpoch: where an epoch ended in this log, from the leader-epoch cache.
Followers and KIP-320 consumers use it to find the exact point where logs diverged."""

from __future__ import annotations

from typing import Any

from kafka.protocol.consumer import OffsetForLeaderEpochResponse

from epochlog.broker.handlers.context import HandlerContext
from epochlog.broker.responses import error_code
from epochlog.protocol.apis import ApiKey, RequestFrame, api
from epochlog.protocol.errors import ErrorCode
from epochlog.security.api_rules import allowed
from epochlog.security.session import Session

API = api(ApiKey.OFFSET_FOR_LEADER_EPOCH, 0, 4)

CONSUMER_REPLICA_ID = -1
DEBUGGING_REPLICA_ID = -2


def _end_offset(
    broker: HandlerContext,
    replica_id: int,
    topic: str,
    wanted: Any,
    version: int,
    refused: ErrorCode,
) -> Any:
    answer = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult.EpochEndOffset(
        error_code=refused, partition=wanted.partition, leader_epoch=-1, end_offset=-1
    )
    if refused != ErrorCode.NONE:
        return answer
    try:
        partition = broker.replica_manager.partition(topic, wanted.partition)
        # Consumers must ask the leader; a replica may answer another replica.
        partition.check_leader(
            wanted.current_leader_epoch if version >= 2 else -1,
            require_leader=replica_id in (CONSUMER_REPLICA_ID, DEBUGGING_REPLICA_ID),
        )
        log = partition.log
        answer.leader_epoch, answer.end_offset = log.epoch_cache.end_offset_for(
            wanted.leader_epoch, log.log_end_offset
        )
    except Exception as exc:
        answer.error_code = error_code(exc)
    return answer


async def handle(
    broker: HandlerContext, request: Any, version: int, frame: RequestFrame, session: Session
) -> Any:
    replica_id = request.replica_id if version >= 3 else CONSUMER_REPLICA_ID
    # KIP-320's rule: a replica (any id but a consumer's) needs CLUSTER_ACTION on the
    # cluster, and is refused as a whole; a client needs DESCRIBE on each topic.
    cluster_refused = replica_id != CONSUMER_REPLICA_ID and not allowed(
        broker.authorizer, session, ApiKey.OFFSET_FOR_LEADER_EPOCH, "replica"
    )

    def refused(topic: str) -> ErrorCode:
        if cluster_refused:
            return ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        if replica_id != CONSUMER_REPLICA_ID or allowed(
            broker.authorizer, session, ApiKey.OFFSET_FOR_LEADER_EPOCH, "topic", topic
        ):
            return ErrorCode.NONE
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED

    topics = []
    for topic in request.topics or []:
        code = refused(topic.topic)
        topics.append(
            OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult(
                topic=topic.topic,
                partitions=[
                    _end_offset(broker, replica_id, topic.topic, p, version, code)
                    for p in topic.partitions or []
                ],
            )
        )
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)
