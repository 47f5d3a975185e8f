"""TxnOffsetCommit (v0-v3): a transactional producer commits a group's offsets inside
its transaction; they become visible with the transaction's commit marker. v2+ carries
each offset's leader epoch (KIP-320), stored as OffsetCommit's is; v3 carries the
consumer's generation and member id, checked against the group."""

from __future__ import annotations

from typing import Any

from kafka.protocol.producer import TxnOffsetCommitResponse

from epochlog.broker.handlers.offset_commit import partition_exists
from epochlog.coordinator.commits import CommitRequest
from epochlog.coordinator.store import TxnProducer
from epochlog.protocol.apis import RequestFrame
from epochlog.protocol.errors import ErrorCode

_Topic = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
_Partition = _Topic.TxnOffsetCommitResponsePartition


async def handle(broker: Any, request: Any, version: int, frame: RequestFrame) -> Any:
    wanted: dict[tuple[str, int], CommitRequest] = {}
    answers: dict[tuple[str, int], ErrorCode] = {}
    order: list[tuple[str, int]] = []
    for topic in request.topics or []:
        for p in topic.partitions or []:
            key = (topic.name, p.partition_index)
            order.append(key)
            if not partition_exists(broker, *key):
                answers[key] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            epoch = p.committed_leader_epoch if version >= 2 else -1
            wanted[key] = CommitRequest(p.committed_offset, epoch, p.committed_metadata)
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
        topics.setdefault(key[0], []).append(
            _Partition(partition_index=key[1], error_code=answers[key])
        )
    return TxnOffsetCommitResponse(
        throttle_time_ms=0,
        topics=[_Topic(name=name, partitions=parts) for name, parts in topics.items()],
    )
