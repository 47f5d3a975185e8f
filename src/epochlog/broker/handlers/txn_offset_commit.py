"""TxnOffsetCommit (v0-v3): a transactional producer commits a group's offsets inside
its transaction; they become visible with the transaction's commit marker. v2+ carries
each offset's leader epoch (KIP-320), stored as OffsetCommit's is; v3 carries the
consumer's generation and member id, checked against the group. v0-v1 get
COORDINATOR_NOT_AVAILABLE for COORDINATOR_LOAD_IN_PROGRESS, as Kafka answers them:
producers of those versions (Kafka's clients before 2.0, KAFKA-7296) do not retry the
loading error."""

from __future__ import annotations

from typing import Any

from kafka.protocol.producer import TxnOffsetCommitResponse

from epochlog.broker.handlers.context import HandlerContext
from epochlog.broker.handlers.offset_commit import commit_requests
from epochlog.coordinator.store import TxnProducer
from epochlog.protocol.apis import ApiKey, RequestFrame, api
from epochlog.protocol.errors import ErrorCode
from epochlog.security.api_rules import allowed, refusal
from epochlog.security.session import Session

API = api(ApiKey.TXN_OFFSET_COMMIT, 0, 3)

_Topic = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
_Partition = _Topic.TxnOffsetCommitResponsePartition


async def handle(
    broker: HandlerContext, request: Any, version: int, frame: RequestFrame, session: Session
) -> Any:
    api = ApiKey.TXN_OFFSET_COMMIT
    whole = refusal(broker.authorizer, session, api, "transactional_id", request.transactional_id)
    if whole == ErrorCode.NONE:
        whole = refusal(broker.authorizer, session, api, "group", request.group_id)

    def refused(topic: str) -> ErrorCode:
        if whole != ErrorCode.NONE:
            return whole
        if allowed(broker.authorizer, session, api, "topic", topic):
            return ErrorCode.NONE
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED

    wanted, answers, order = commit_requests(broker, request.topics, version >= 2, refused)
    if wanted:
        answers.update(
            await broker.coordinator.offsets.txn_commit(
                request.group_id,
                TxnProducer(request.producer_id, request.producer_epoch),
                request.generation_id if version >= 3 else -1,
                (request.member_id or "") if version >= 3 else "",
                request.group_instance_id if version >= 3 else None,
                wanted,
            )
        )
    topics: dict[str, list[Any]] = {}
    for key in order:
        code = answers[key]
        if version < 2 and code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            code = ErrorCode.COORDINATOR_NOT_AVAILABLE
        topics.setdefault(key[0], []).append(_Partition(partition_index=key[1], error_code=code))
    return TxnOffsetCommitResponse(
        throttle_time_ms=0,
        topics=[_Topic(name=name, partitions=parts) for name, parts in topics.items()],
    )
