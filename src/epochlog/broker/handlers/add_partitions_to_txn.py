"""AddPartitionsToTxn. From a producer (v0-v3): the partitions it is about to write in
its transaction, so the coordinator will send each one a marker. From a partition
leader (v4, Kafka's broker-to-broker version; CLUSTER_ACTION): transactions to add to
or, with ``verify_only`` (KIP-890), to ask whether they include the partitions the
leader is about to append their first batch to. Partitions of unknown topics fail with
UNKNOWN_TOPIC_OR_PARTITION and the others of their transaction with
OPERATION_NOT_ATTEMPTED, as in Kafka; otherwise an added transaction's partitions get
the one answer, a verified one's each its own."""

from __future__ import annotations

from typing import Any

from kafka.protocol.producer import AddPartitionsToTxnResponse

from epochlog.broker.handlers.context import HandlerContext
from epochlog.broker.responses import fenced_error
from epochlog.protocol.apis import ApiKey, RequestFrame, api
from epochlog.protocol.errors import ErrorCode
from epochlog.security.api_rules import allowed, refusal
from epochlog.security.session import Session
from epochlog.txn.metadata import TopicPartition

API = api(ApiKey.ADD_PARTITIONS_TO_TXN, 0, 4)

PRODUCER_FENCED_SINCE = 2
FROM_BROKERS_SINCE = 4

_TopicResult = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
_PartitionResult = _TopicResult.AddPartitionsToTxnPartitionResult
_Result = AddPartitionsToTxnResponse.AddPartitionsToTxnResult


async def handle(
    broker: HandlerContext, request: Any, version: int, frame: RequestFrame, session: Session
) -> Any:
    if version >= FROM_BROKERS_SINCE:
        return await _from_broker(broker, request, session)
    wanted = _partitions(request.v3_and_below_topics)
    api = ApiKey.ADD_PARTITIONS_TO_TXN
    tid = request.v3_and_below_transactional_id
    txn_refused = refusal(broker.authorizer, session, api, "transactional_id", tid)
    writable = {name: allowed(broker.authorizer, session, api, "topic", name) for name, _ in wanted}
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
    else:
        codes = _unknown(broker, wanted) or dict.fromkeys(
            wanted,
            fenced_error(
                await broker.txn_coordinator.add_partitions(
                    tid,
                    request.v3_and_below_producer_id,
                    request.v3_and_below_producer_epoch,
                    frozenset(wanted),
                ),
                version,
                PRODUCER_FENCED_SINCE,
            ),
        )
    return AddPartitionsToTxnResponse(
        throttle_time_ms=0, results_by_topic_v3_and_below=_by_topic(codes)
    )


async def _from_broker(broker: HandlerContext, request: Any, session: Session) -> Any:
    """v4: only brokers send it; each transaction is answered on its own."""
    refused = refusal(broker.authorizer, session, ApiKey.ADD_PARTITIONS_TO_TXN, "cluster")
    if refused != ErrorCode.NONE:
        return AddPartitionsToTxnResponse(
            throttle_time_ms=0, error_code=refused, results_by_transaction=[]
        )
    coordinator = broker.txn_coordinator
    results = []
    for txn in request.transactions or []:
        wanted = _partitions(txn.topics)
        codes = _unknown(broker, wanted)
        if not codes and txn.verify_only:
            codes = coordinator.verify_partitions(
                txn.transactional_id, txn.producer_id, txn.producer_epoch, frozenset(wanted)
            )
        elif not codes:
            code = await coordinator.add_partitions(
                txn.transactional_id, txn.producer_id, txn.producer_epoch, frozenset(wanted)
            )
            codes = dict.fromkeys(wanted, code)
        results.append(
            _Result(transactional_id=txn.transactional_id, topic_results=_by_topic(codes))
        )
    return AddPartitionsToTxnResponse(
        throttle_time_ms=0, error_code=ErrorCode.NONE, results_by_transaction=results
    )


def _partitions(topics: Any) -> list[TopicPartition]:
    return [(topic.name, index) for topic in topics or [] for index in topic.partitions or []]


def _unknown(
    broker: HandlerContext, wanted: list[TopicPartition]
) -> dict[TopicPartition, ErrorCode]:
    """Kafka's answer when any partition is unknown (empty when all are known)."""
    unknown = {tp for tp in wanted if not _exists(broker, *tp)}
    if not unknown:
        return {}
    return {
        tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if tp in unknown
        else ErrorCode.OPERATION_NOT_ATTEMPTED
        for tp in wanted
    }


def _by_topic(codes: dict[TopicPartition, ErrorCode]) -> list[Any]:
    by_topic: dict[str, list[Any]] = {}
    for (topic, index), code in codes.items():
        by_topic.setdefault(topic, []).append(
            _PartitionResult(partition_index=index, partition_error_code=code)
        )
    return [
        _TopicResult(name=topic, results_by_partition=results)
        for topic, results in by_topic.items()
    ]


def _exists(broker: HandlerContext, topic: str, index: int) -> bool:
    known = broker.metadata_cache.topic(topic)
    return known is not None and index in known.partitions
