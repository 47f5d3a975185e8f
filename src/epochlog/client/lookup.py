"""Offset lookups for any partition (assigned or not): ListOffsets v7 to each leader
with the CurrentLeaderEpoch of the client's metadata, keeping the leader epoch each
answer carries. Used by ``AsyncConsumer.offsets_for_times`` and the admin client."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kafka.protocol.consumer import ListOffsetsRequest, OffsetForLeaderEpochRequest

from epochlog.client.errors import KafkaClientError, TopicPartition
from epochlog.client.metadata import Cluster, backoff_seconds
from epochlog.protocol.errors import ErrorCode

LIST_OFFSETS_VERSION = 7
EARLIEST = -2
LATEST = -1
CONSUMER_REPLICA_ID = -1
# Answers that a fresher metadata view or a little patience resolves.
RETRIABLE = {
    ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.OFFSET_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT,
}


@dataclass(frozen=True)
class OffsetAndTimestamp:
    """The first offset at or after a timestamp, that record's timestamp and the leader
    epoch of the batch holding it (so a seek to it can be validated)."""

    offset: int
    timestamp: int
    leader_epoch: int | None = None


async def list_offsets(
    cluster: Cluster,
    wanted: Mapping[TopicPartition, int],
    timeout_s: float,
    backoff: tuple[int, int] = (100, 1000),
    isolation_level: int = 0,
    in_use: Iterable[TopicPartition] = (),
) -> dict[TopicPartition, OffsetAndTimestamp | None]:
    """For each partition the answer for its timestamp (or EARLIEST/LATEST); None when
    no record is at or after the timestamp. Leadership errors refresh metadata and are
    retried until ``timeout_s``. ``in_use``: partitions the caller reads, for the
    KIP-232 check of a re-created topic."""
    clock = cluster.clock
    deadline = clock.monotonic() + timeout_s
    pending = dict(wanted)
    out: dict[TopicPartition, OffsetAndTimestamp | None] = {}
    attempt = 0
    last: dict[TopicPartition, ErrorCode] = {}
    in_use = list(in_use)
    while pending:
        await cluster.refresh({tp.topic for tp in pending}, in_use)
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in pending:
            meta = cluster.cache.partition(tp)
            if meta is None or meta.leader < 0:
                known = tp.topic in cluster.cache.topics
                last[tp] = (
                    ErrorCode.LEADER_NOT_AVAILABLE
                    if known
                    else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                )
                continue
            by_leader.setdefault(meta.leader, []).append(tp)
        answers = await asyncio.gather(
            *(
                _ask(cluster, leader, {tp: pending[tp] for tp in tps}, isolation_level)
                for leader, tps in by_leader.items()
            )
        )
        for answer in answers:
            for tp, result in answer.items():
                if isinstance(result, ErrorCode):
                    if result not in RETRIABLE:
                        raise KafkaClientError(result, f"ListOffsets for {tp}")
                    last[tp] = result
                    continue
                del pending[tp]
                last.pop(tp, None)
                offset, timestamp, epoch = result
                out[tp] = (
                    None
                    if offset < 0
                    else OffsetAndTimestamp(offset, timestamp, epoch if epoch >= 0 else None)
                )
        if not pending:
            break
        if clock.monotonic() >= deadline:
            code = next(iter(last.values()), ErrorCode.REQUEST_TIMED_OUT)
            names = ", ".join(str(tp) for tp in sorted(pending))
            raise KafkaClientError(code, f"ListOffsets for {names} within {timeout_s}s")
        await clock.sleep(backoff_seconds(attempt, *backoff))
        attempt += 1
    return out


def offsets_for_leader_epoch_request(epochs: Mapping[TopicPartition, tuple[int, int]]) -> Any:
    """A consumer's OffsetsForLeaderEpoch (KIP-320): per partition (the leader epoch it
    knows, to be fenced with; the epoch of the record before its position, whose end
    offset it asks for)."""
    topic_cls = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
    by_topic: dict[str, list[TopicPartition]] = {}
    for tp in epochs:
        by_topic.setdefault(tp.topic, []).append(tp)
    return OffsetForLeaderEpochRequest(
        replica_id=CONSUMER_REPLICA_ID,
        topics=[
            topic_cls(
                topic=topic,
                partitions=[
                    topic_cls.OffsetForLeaderPartition(
                        partition=tp.partition,
                        current_leader_epoch=epochs[tp][0],
                        leader_epoch=epochs[tp][1],
                    )
                    for tp in group
                ],
            )
            for topic, group in by_topic.items()
        ],
    )


def list_offsets_request(
    wanted: Mapping[TopicPartition, int],
    current_epoch: Callable[[TopicPartition], int],
    isolation_level: int,
    replica_id: int = CONSUMER_REPLICA_ID,
) -> Any:
    """ListOffsets for each partition's timestamp (or EARLIEST / LATEST), fenced with
    the CurrentLeaderEpoch the caller knows (KIP-320; -1: not fenced)."""
    topic_cls = ListOffsetsRequest.ListOffsetsTopic
    by_topic: dict[str, list[TopicPartition]] = {}
    for tp in wanted:
        by_topic.setdefault(tp.topic, []).append(tp)
    return ListOffsetsRequest(
        replica_id=replica_id,
        isolation_level=isolation_level,
        topics=[
            topic_cls(
                name=topic,
                partitions=[
                    topic_cls.ListOffsetsPartition(
                        partition_index=tp.partition,
                        current_leader_epoch=current_epoch(tp),
                        timestamp=wanted[tp],
                    )
                    for tp in group
                ],
            )
            for topic, group in by_topic.items()
        ],
    )


async def _ask(
    cluster: Cluster, leader: int, wanted: Mapping[TopicPartition, int], isolation_level: int
) -> dict[TopicPartition, tuple[int, int, int] | ErrorCode]:
    def current_epoch(tp: TopicPartition) -> int:
        meta = cluster.cache.partition(tp)
        return -1 if meta is None else meta.leader_epoch

    request = list_offsets_request(wanted, current_epoch, isolation_level)
    try:
        response: Any = await cluster.send(leader, request, LIST_OFFSETS_VERSION)
    except (ConnectionError, OSError):
        return {tp: ErrorCode.NOT_LEADER_OR_FOLLOWER for tp in wanted}
    out: dict[TopicPartition, tuple[int, int, int] | ErrorCode] = {}
    for t in response.topics:
        for p in t.partitions:
            tp = TopicPartition(t.name, p.partition_index)
            code = ErrorCode(p.error_code)
            out[tp] = code if code != ErrorCode.NONE else (p.offset, p.timestamp, p.leader_epoch)
    return out
