"""WriteTxnMarkers (v1), from a transaction coordinator: write each marker as the
partition's leader (acks=all, so a marker is acknowledged only once replicated), then
let the group coordinator decide the transactional offsets a marker on a
``__consumer_offsets`` partition ends."""

from __future__ import annotations

import logging
from typing import Any

from kafka.protocol.producer import WriteTxnMarkersResponse

from epochlog.broker.handlers.context import HandlerContext
from epochlog.broker.responses import error_code
from epochlog.coordinator.hashing import OFFSETS_TOPIC
from epochlog.protocol.apis import ApiKey, RequestFrame, api
from epochlog.protocol.errors import ErrorCode
from epochlog.replication.replica_manager import AckWait
from epochlog.security.api_rules import refusal
from epochlog.security.session import Session

API = api(ApiKey.WRITE_TXN_MARKERS, 1, 1)

log = logging.getLogger("epochlog.txn")

_Result = WriteTxnMarkersResponse.WritableTxnMarkerResult
_TopicResult = _Result.WritableTxnMarkerTopicResult
_PartitionResult = _TopicResult.WritableTxnMarkerPartitionResult
MARKER_TIMEOUT_S = 30.0


async def handle(
    broker: HandlerContext, request: Any, version: int, frame: RequestFrame, session: Session
) -> Any:
    rm = broker.replica_manager
    # Only brokers (a transaction coordinator) write markers: CLUSTER_ACTION.
    refused = refusal(broker.authorizer, session, ApiKey.WRITE_TXN_MARKERS, "cluster")
    answers: list[tuple[Any, str, int, Any, bool]] = []
    waits: list[tuple[Any, AckWait]] = []
    results = []
    for marker in request.markers or []:
        topics = []
        for topic in marker.topics or []:
            parts = []
            for index in topic.partition_indexes or []:
                answer = _PartitionResult(partition_index=index, error_code=refused)
                if refused != ErrorCode.NONE:
                    parts.append(answer)
                    continue
                try:
                    partition = rm.partition(topic.name, index)
                    partition.check_leader(-1)
                    written = rm.write_txn_marker(
                        partition,
                        marker.producer_id,
                        marker.producer_epoch,
                        marker.coordinator_epoch,
                        marker.transaction_result,
                    )
                    wait = AckWait(partition, written.last_offset + 1, partition.leader_epoch)
                    waits.append((answer, wait))
                    answers.append(
                        (answer, topic.name, index, marker.producer_id, marker.transaction_result)
                    )
                except Exception as exc:
                    answer.error_code = error_code(exc)
                    log.info(
                        "marker of producer %d for %s-%d refused: %s",
                        marker.producer_id,
                        topic.name,
                        index,
                        ErrorCode(answer.error_code).name,
                    )
                parts.append(answer)
            topics.append(_TopicResult(name=topic.name, partitions=parts))
        results.append(_Result(producer_id=marker.producer_id, topics=topics))
    if waits:
        codes = await rm.wait_for_acks([w for _, w in waits], MARKER_TIMEOUT_S)
        for (answer, _), code in zip(waits, codes, strict=True):
            answer.error_code = code
    for answer, topic, index, producer_id, commit in answers:
        if topic == OFFSETS_TOPIC and answer.error_code == ErrorCode.NONE:
            broker.coordinator.offsets.complete_txn_offsets(index, producer_id, commit)
    return WriteTxnMarkersResponse(markers=results)
