"""AddPartitionsToTxn (v0-v3): the producer names the partitions it is about to write
in its transaction, so the coordinator will send each one a marker. Partitions of
unknown topics fail with UNKNOWN_TOPIC_OR_PARTITION and the others with
OPERATION_NOT_ATTEMPTED, as in Kafka; otherwise every partition gets the one answer."""

from __future__ import annotations

from typing import Any

from kafka.protocol.producer import AddPartitionsToTxnResponse

from epochlog.broker.handlers.context import HandlerContext
from epochlog.broker.responses import fenced_error
from epochlog.protocol.apis import ApiKey, RequestFrame, api
from epochlog.protocol.errors import ErrorCode
from epochlog.security.api_rules import allowed, refusal
from epochlog.security.session import Session

API = api(ApiKey.ADD_PARTITIONS_TO_TXN, 0, 3)

PRODUCER_FENCED_SINCE = 2

_TopicResult = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
_PartitionResult = _TopicResult.AddPartitionsToTxnPartitionResult


async def handle(
    broker: HandlerContext, request: Any, version: int, frame: RequestFrame, session: Session
) -> Any:
    wanted = [
        (topic.name, index)
        for topic in request.v3_and_below_topics or []
        for index in topic.partitions or []
    ]
    api = ApiKey.ADD_PARTITIONS_TO_TXN
    txn_refused = refusal(
        broker.authorizer, session, api, "transactional_id", request.v3_and_below_transactional_id
    )
    writable = {name: allowed(broker.authorizer, session, api, "topic", name) for name, _ in wanted}
    unknown = {tp for tp in wanted if not _exists(broker, *tp)}
    if txn_refused != ErrorCode.NONE:
        codes = dict.fromkeys(wanted, txn_refused)
    elif not all(writable.values()):
        # Kafka's answer: the refused topics' partitions say so, the others were not tried.
        codes = {
            tp: ErrorCode.OPERATION_NOT_ATTEMPTED
            if writable[tp[0]]
            else ErrorCode.TOPIC_AUTHORIZATION_FAILED
            for tp in wanted
        }
    elif unknown:
        codes = {
            tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            if tp in unknown
            else ErrorCode.OPERATION_NOT_ATTEMPTED
            for tp in wanted
        }
    else:
        code = await broker.txn_coordinator.add_partitions(
            request.v3_and_below_transactional_id,
            request.v3_and_below_producer_id,
            request.v3_and_below_producer_epoch,
            frozenset(wanted),
        )
        code = fenced_error(code, version, PRODUCER_FENCED_SINCE)
        codes = dict.fromkeys(wanted, code)
    by_topic: dict[str, list[Any]] = {}
    for (topic, index), code in codes.items():
        by_topic.setdefault(topic, []).append(
            _PartitionResult(partition_index=index, partition_error_code=code)
        )
    return AddPartitionsToTxnResponse(
        throttle_time_ms=0,
        results_by_topic_v3_and_below=[
            _TopicResult(name=topic, results_by_partition=results)
            for topic, results in by_topic.items()
        ],
    )


def _exists(broker: HandlerContext, topic: str, index: int) -> bool:
    known = broker.metadata_cache.topic(topic)
    return known is not None and index in known.partitions
