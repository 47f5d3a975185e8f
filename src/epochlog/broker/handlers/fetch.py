"""Fetch: read record batches up to the high watermark (consumers; the last stable
offset under read_committed, with the aborted transactions of the range read) or the
log end (replicas), after KIP-320's checks (CurrentLeaderEpoch from v9, LastFetchedEpoch →
DivergingEpoch from v12). A replica's fetch also tells the leader where that follower
is, which moves the high watermark and the ISR."""

from __future__ import annotations

import uuid
from typing import Any

from epochlog.broker.handlers.context import HandlerContext
from epochlog.broker.responses import RawResponse, error_code
from epochlog.protocol.apis import ApiKey, RequestFrame, api
from epochlog.protocol.divergence import fetch_diverges
from epochlog.protocol.errors import ErrorCode, KafkaError
from epochlog.protocol.fetch_response import PartitionData, TopicData, encode_fetch_response
from epochlog.security.api_rules import allowed
from epochlog.security.session import Session

API = api(ApiKey.FETCH, 4, 13)

READ_COMMITTED = 1
NO_EPOCH = -1


class _Budget:
    """What remains of the response's max_bytes, and whether a batch was read yet."""

    def __init__(self, max_bytes: int) -> None:
        self.remaining = max_bytes
        self.read_any = False
        self.total = 0


def _read_partition(
    broker: HandlerContext,
    topic: str,
    fetch: Any,
    version: int,
    isolation: int,
    budget: _Budget,
    replica_id: int,
) -> PartitionData:
    result = PartitionData(fetch.partition)
    try:
        partition = broker.replica_manager.partition(topic, fetch.partition)
    except KafkaError as exc:
        result.error_code = exc.code
        return result
    try:
        current_epoch = fetch.current_leader_epoch if version >= 9 else NO_EPOCH
        partition.check_leader(current_epoch)
        is_replica = replica_id >= 0
        if is_replica and replica_id not in partition.state.replicas:
            raise KafkaError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"broker {replica_id} is not a replica of {topic}-{fetch.partition}",
            )
        log = partition.log
        if isolation == READ_COMMITTED:
            result.aborted_transactions = []
        result.log_start_offset = log.log_start_offset
        if version >= 12 and fetch.last_fetched_epoch >= 0:
            epoch, end_offset = log.epoch_cache.end_offset_for(
                fetch.last_fetched_epoch, log.log_end_offset
            )
            if fetch_diverges(fetch.last_fetched_epoch, fetch.fetch_offset, epoch, end_offset):
                # A diverged follower's offset says nothing of what it holds in common.
                result.diverging_epoch = (epoch, end_offset)
                result.high_watermark = partition.high_watermark
                result.last_stable_offset = partition.last_stable_offset()
                return result
        if is_replica and log.log_start_offset <= fetch.fetch_offset <= log.log_end_offset:
            broker.replica_manager.record_follower_fetch(
                partition, replica_id, fetch.fetch_offset, current_epoch
            )
        high_watermark = partition.high_watermark
        last_stable = partition.last_stable_offset()
        result.high_watermark = high_watermark
        result.last_stable_offset = last_stable
        max_bytes = min(fetch.partition_max_bytes, budget.remaining)
        if is_replica:
            limit = None
        else:
            limit = last_stable if isolation == READ_COMMITTED else high_watermark
        read = log.read(
            fetch.fetch_offset, max_bytes, max_offset=limit, min_one_batch=not budget.read_any
        )
        if isolation == READ_COMMITTED and read.slices:
            result.aborted_transactions = log.collect_aborted_transactions(
                fetch.fetch_offset, last_stable
            )
    except Exception as exc:
        result.error_code = error_code(exc)
        if version >= 12 and exc_is_leadership(result.error_code):
            result.current_leader = (partition.state.leader, partition.leader_epoch)
        return result
    if read.slices:
        size = sum(s.size for s in read.slices)
        result.records = list(read.slices)
        budget.read_any = True
        budget.remaining = max(0, budget.remaining - size)
        budget.total += size
    return result


def exc_is_leadership(code: ErrorCode) -> bool:
    return code in (
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
    )


def _topic_allowed(broker: HandlerContext, session: Session, replica_id: int, name: str) -> bool:
    """A follower needs CLUSTER_ACTION on the cluster, a consumer READ on the topic;
    either refused gets TOPIC_AUTHORIZATION_FAILED per partition, as Kafka answers."""
    if replica_id >= 0:
        return allowed(broker.authorizer, session, ApiKey.FETCH, "replica")
    return allowed(broker.authorizer, session, ApiKey.FETCH, "topic", name)


def _read_all(
    broker: HandlerContext, request: Any, version: int, session: Session
) -> tuple[list[TopicData], _Budget, bool]:
    budget = _Budget(request.max_bytes if version >= 3 else 1 << 31)
    topics: list[TopicData] = []
    any_error = False
    cache = broker.metadata_cache
    for fetch_topic in request.topics or []:
        if version >= 13:
            # kafka.protocol decodes the zero UUID as None.
            topic_id = fetch_topic.topic_id or uuid.UUID(int=0)
            name = cache.topic_name(topic_id)
        else:
            name = fetch_topic.topic
            meta = cache.topic(name)
            topic_id = meta.topic_id if meta else uuid.UUID(int=0)
        partitions = []
        for fetch in fetch_topic.partitions or []:
            if name is None:
                partitions.append(PartitionData(fetch.partition, ErrorCode.UNKNOWN_TOPIC_ID))
            elif not _topic_allowed(broker, session, request.replica_id, name):
                partitions.append(
                    PartitionData(fetch.partition, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                )
            else:
                partitions.append(
                    _read_partition(
                        broker,
                        name,
                        fetch,
                        version,
                        request.isolation_level,
                        budget,
                        request.replica_id,
                    )
                )
            last = partitions[-1]
            any_error |= last.error_code != 0 or last.diverging_epoch is not None
        topics.append(TopicData(name or "", topic_id, partitions))
    return topics, budget, any_error


async def handle(
    broker: HandlerContext, request: Any, version: int, frame: RequestFrame, session: Session
) -> Any:
    if version >= 7 and request.session_id != 0:
        # Incremental fetch sessions (KIP-227) are not offered: session id 0 in every
        # answer tells clients to keep sending full requests.
        return RawResponse(
            encode_fetch_response(version, [], error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND),
            [ErrorCode.FETCH_SESSION_ID_NOT_FOUND],
        )
    clock = broker.seams.clock
    deadline = clock.monotonic() + max(0, request.max_wait_ms) / 1000
    while True:
        topics, budget, any_error = _read_all(broker, request, version, session)
        remaining = deadline - clock.monotonic()
        stopping = broker.replica_manager.stopped
        if budget.total >= request.min_bytes or any_error or remaining <= 0 or stopping:
            break
        await broker.replica_manager.wait_for_data(remaining)
    if request.replica_id < 0:
        stats = broker.replica_manager.topic_stats
        for topic in topics:
            for p in topic.partitions:
                if p.records:
                    stats.fetched(topic.name, p.records_size)
    # Kafka counts the answer's top-level error (v7+) with each partition's.
    codes = [ErrorCode.NONE] if version >= 7 else []
    codes += [p.error_code for topic in topics for p in topic.partitions]
    return RawResponse(encode_fetch_response(version, topics), codes)
