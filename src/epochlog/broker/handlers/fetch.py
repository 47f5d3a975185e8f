"""Fetch: read record batches up to the high watermark (consumers; the last stable
offset under read_committed, with the aborted transactions of the range read) or the
log end (replicas), after KIP-320's checks (CurrentLeaderEpoch from v9, LastFetchedEpoch →
DivergingEpoch from v12). From v11 a consumer may fetch from a follower, and a leader may
send it to one (KIP-392, ``broker/follower_reads.py``). A replica's fetch also tells the
leader where that follower is, which moves the high watermark and the ISR. From v7 a
fetch may be part of a fetch session (KIP-227, ``broker/fetch_sessions.py``): an
incremental fetch reads every partition of its session and answers only those with news.
A consumer's fetch is charged to its consumer byte-rate and request quotas
(``quotas.accounting``): over either, it is answered empty with the throttle time, as
Kafka does."""

from __future__ import annotations

import uuid
from typing import Any

from epochlog.broker.fetch_sessions import CachedPartition, FetchContext, PartitionKey
from epochlog.broker.follower_reads import FollowerReads, not_hosted_error
from epochlog.broker.handlers.context import HandlerContext
from epochlog.broker.responses import RawResponse, error_code
from epochlog.protocol.apis import ApiKey, RequestFrame, api
from epochlog.protocol.divergence import fetch_diverges
from epochlog.protocol.errors import ErrorCode, KafkaError
from epochlog.protocol.fetch_response import PartitionData, TopicData, encode_fetch_response
from epochlog.quotas import accounting
from epochlog.security.api_rules import allowed
from epochlog.security.session import Session

API = api(ApiKey.FETCH, 4, 13)

READ_COMMITTED = 1
NO_EPOCH = -1
ZERO_UUID = uuid.UUID(int=0)


class _Budget:
    """What remains of the response's max_bytes, and whether a batch was read yet."""

    def __init__(self, max_bytes: int) -> None:
        self.remaining = max_bytes
        self.read_any = False
        self.total = 0


def _read_partition(
    broker: HandlerContext,
    topic: str,
    fetch: CachedPartition,
    version: int,
    isolation: int,
    budget: _Budget,
    replica_id: int,
    follower_reads: FollowerReads,
) -> tuple[PartitionData, int]:
    """What is read of one partition, and its leader epoch here (told to a session)."""
    result = PartitionData(fetch.partition)
    try:
        partition = broker.replica_manager.partition(topic, fetch.partition)
    except KafkaError as exc:
        code = not_hosted_error(broker, topic, fetch.partition, exc.code)
        result.error_code = _known_to(version, code)
        return result, NO_EPOCH
    leader_epoch = partition.leader_epoch
    try:
        current_epoch = fetch.current_leader_epoch
        partition.check_leader(current_epoch, follower_reads.require_leader(partition))
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
        if fetch.last_fetched_epoch >= 0:
            epoch, end_offset = log.epoch_cache.end_offset_for(
                fetch.last_fetched_epoch, log.log_end_offset
            )
            if fetch_diverges(fetch.last_fetched_epoch, fetch.fetch_offset, epoch, end_offset):
                # A diverged follower's offset says nothing of what it holds in common.
                result.diverging_epoch = (epoch, end_offset)
                result.high_watermark = partition.high_watermark
                result.last_stable_offset = partition.last_stable_offset()
                return result, leader_epoch
        if is_replica and log.log_start_offset <= fetch.fetch_offset <= log.log_end_offset:
            broker.replica_manager.record_follower_fetch(
                partition, replica_id, fetch.fetch_offset, current_epoch, fetch.log_start_offset
            )
        high_watermark = partition.high_watermark
        last_stable = partition.last_stable_offset()
        result.high_watermark = high_watermark
        result.last_stable_offset = last_stable
        # A leader may send a consumer elsewhere (KIP-392): no records, the watermarks.
        result.preferred_read_replica = follower_reads.preferred(partition, fetch.fetch_offset)
        if result.preferred_read_replica >= 0:
            return result, leader_epoch
        max_bytes = min(fetch.partition_max_bytes, budget.remaining)
        if is_replica:
            limit = None
        else:
            # On a follower: the high watermark the leader propagated, never its log end.
            limit = last_stable if isolation == READ_COMMITTED else high_watermark
        read = log.read(
            fetch.fetch_offset, max_bytes, max_offset=limit, min_one_batch=not budget.read_any
        )
        if isolation == READ_COMMITTED and read.slices:
            result.aborted_transactions = log.collect_aborted_transactions(
                fetch.fetch_offset, last_stable
            )
    except Exception as exc:
        result.error_code = _known_to(version, error_code(exc))
        if version >= 12 and exc_is_leadership(result.error_code):
            result.current_leader = (partition.state.leader, partition.leader_epoch)
        return result, leader_epoch
    if read.slices:
        size = sum(s.size for s in read.slices)
        result.records = list(read.slices)
        result.offsets_sent = max(0, read.next_offset - fetch.fetch_offset)
        budget.read_any = True
        budget.remaining = max(0, budget.remaining - size)
        budget.total += size
    return result, leader_epoch


def _known_to(version: int, code: ErrorCode) -> ErrorCode:
    """KAFKA_STORAGE_ERROR is NOT_LEADER_OR_FOLLOWER to a client of Fetch v5 or older, as
    Kafka answers: such a client may not know the code and would give up, where it
    retries the other after a metadata refresh (and finds the partition's new leader)."""
    if code == ErrorCode.KAFKA_STORAGE_ERROR and version <= 5:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    return code


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


def _asked(broker: HandlerContext, request: Any, version: int) -> list[CachedPartition]:
    """The request's partitions; by name before v13, by topic id from v13 (the name is
    then looked up at every read, ``_read_all``)."""
    cache = broker.metadata_cache
    asked = []
    for fetch_topic in request.topics or []:
        name: str | None = None
        if version >= 13:
            # kafka.protocol decodes the zero UUID as None.
            topic_id = fetch_topic.topic_id or ZERO_UUID
        else:
            name = fetch_topic.topic
            meta = cache.topic(name)
            topic_id = meta.topic_id if meta else ZERO_UUID
        for fetch in fetch_topic.partitions or []:
            asked.append(
                CachedPartition(
                    name,
                    topic_id,
                    fetch.partition,
                    fetch.fetch_offset,
                    fetch.current_leader_epoch if version >= 9 else NO_EPOCH,
                    fetch.last_fetched_epoch if version >= 12 else NO_EPOCH,
                    fetch.log_start_offset if version >= 5 else -1,
                    fetch.partition_max_bytes,
                )
            )
    return asked


def _forgotten(request: Any, version: int) -> list[PartitionKey]:
    if version < 7:
        return []
    return [
        ((t.topic_id or ZERO_UUID) if version >= 13 else t.topic, index)
        for t in request.forgotten_topics_data or []
        for index in t.partitions or []
    ]


def _context(broker: HandlerContext, request: Any, version: int) -> FetchContext:
    """The request's fetch session context (KIP-227); before v7 every fetch is full."""
    asked = _asked(broker, request, version)
    if version < 7:
        return FetchContext(broker.fetch_sessions, asked)
    return broker.fetch_sessions.new_context(
        request.session_id,
        request.session_epoch,
        asked,
        _forgotten(request, version),
        privileged=request.replica_id >= 0,
        uses_topic_ids=version >= 13,
    )


Read = tuple[CachedPartition, PartitionData, int]


# What a partition's quiet answer (no records, no error) depends on: the replica and its
# state (and whether it is resigning: its answer is then NOT_LEADER_OR_FOLLOWER), log
# start, high watermark, and what the fetch reads up to: a follower the log end, a
# read_committed consumer the last stable offset.
Stamp = tuple[object, object, bool, int, int, int]


def _stamp(broker: HandlerContext, name: str, index: int, request: Any) -> Stamp | None:
    try:
        partition = broker.replica_manager.partition(name, index)
    except KafkaError:
        return None
    log = partition.log
    if request.replica_id >= 0:
        bound = log.log_end_offset
    elif request.isolation_level == READ_COMMITTED:
        bound = partition.last_stable_offset()
    else:
        bound = -1
    return (
        partition,
        partition.state,
        partition.resigning,
        log.log_start_offset,
        partition.high_watermark,
        bound,
    )


# No earlier read of a partition (the first pass of a poll).
NO_READ: Any = (None, None, NO_EPOCH)


def _quiet(data: PartitionData) -> bool:
    return (
        data.error_code == 0
        and not data.records
        and data.diverging_epoch is None
        and data.preferred_read_replica < 0
    )


def _stamps(
    broker: HandlerContext, request: Any, reads: list[Read]
) -> list[tuple[Read, Stamp | None]]:
    """Each read with its stamp if it was quiet: taken only when a long poll is about to
    wait (an answer sent at once needs none), with nothing awaited since the reads."""
    return [
        (read, _stamp(broker, read[0].topic, read[0].partition, request))
        if read[0].topic is not None and _quiet(read[1])
        else (read, None)
        for read in reads
    ]


def _read_all(
    broker: HandlerContext,
    request: Any,
    version: int,
    session: Session,
    partitions: list[CachedPartition],
    max_bytes: int,
    before: list[tuple[Read, Stamp | None]] | None = None,
) -> tuple[list[Read], _Budget, bool]:
    """Every partition read for one answer. ``before``: the previous pass of a long poll
    with its stamps (``_stamps``), woken by a change somewhere on this broker; a
    partition that was quiet then and whose stamp has not moved is not read again (a
    fetch of many partitions re-read them all at every append to any partition)."""
    budget = _Budget(max_bytes)
    reads: list[Read] = []
    any_error = False
    rack = request.rack_id if version >= 11 else None
    follower_reads = FollowerReads(broker, session.listener, request.replica_id, version, rack)
    # A redirect to a rack's follower depends on other replicas' progress too.
    known = before if not rack else None
    allowed_topics: dict[str, bool] = {}
    names: dict[uuid.UUID, str | None] = {}
    for fetch in partitions:
        name = fetch.topic
        if version >= 13:
            # Resolved at every read: a session outlives a topic deleted (its id then
            # unknown) or created after the id was first asked for.
            if fetch.topic_id not in names:
                names[fetch.topic_id] = broker.metadata_cache.topic_name(fetch.topic_id)
            name = fetch.topic = names[fetch.topic_id]
        leader_epoch = NO_EPOCH
        if name is None:
            data = PartitionData(fetch.partition, ErrorCode.UNKNOWN_TOPIC_ID)
        else:
            if name not in allowed_topics:
                allowed_topics[name] = _topic_allowed(broker, session, request.replica_id, name)
            if not allowed_topics[name]:
                data = PartitionData(fetch.partition, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            else:
                (_, quiet, quiet_epoch), stamp = known[len(reads)] if known else (NO_READ, None)
                if stamp is not None and _stamp(broker, name, fetch.partition, request) == stamp:
                    data, leader_epoch = quiet, quiet_epoch
                else:
                    data, leader_epoch = _read_partition(
                        broker,
                        name,
                        fetch,
                        version,
                        request.isolation_level,
                        budget,
                        request.replica_id,
                        follower_reads,
                    )
        reads.append((fetch, data, leader_epoch))
        # An error, a divergence or a redirect to another replica is answered at once.
        any_error |= data.error_code != 0 or data.diverging_epoch is not None
        any_error |= data.preferred_read_replica >= 0
    return reads, budget, any_error


def _by_topic(answered: list[tuple[CachedPartition, PartitionData]]) -> list[TopicData]:
    """Partitions grouped by topic, topics in the order they first appear."""
    topics: dict[tuple[str, uuid.UUID], TopicData] = {}
    for fetch, data in answered:
        key = (fetch.topic or "", fetch.topic_id)
        topic = topics.get(key)
        if topic is None:
            topic = topics[key] = TopicData(key[0], key[1], [])
        topic.partitions.append(data)
    return list(topics.values())


async def handle(
    broker: HandlerContext, request: Any, version: int, frame: RequestFrame, session: Session
) -> Any:
    try:
        context = _context(broker, request, version)
    except KafkaError as exc:
        # A session error answers the whole request, with no partitions (as Kafka does).
        return RawResponse(encode_fetch_response(version, [], error_code=exc.code), [exc.code])
    clock = broker.seams.clock
    deadline = clock.monotonic() + max(0, request.max_wait_ms) / 1000
    max_bytes = request.max_bytes if version >= 3 else 1 << 31
    account = accounting.current() if request.replica_id < 0 else None
    if account is not None and not account.judges_fetch:
        account = None
    if account is not None:
        # Never more than the quota's whole window allows (Kafka's maxQuotaWindowBytes).
        max_bytes = int(min(max_bytes, account.fetch_cap()))
    min_bytes = min(request.min_bytes, max_bytes)
    stamped = None
    while True:
        reads, budget, any_error = _read_all(
            broker, request, version, session, context.partitions, max_bytes, stamped
        )
        remaining = deadline - clock.monotonic()
        stopping = broker.replica_manager.stopped
        if budget.total >= min_bytes or any_error or remaining <= 0 or stopping:
            break
        stamped = _stamps(broker, request, reads)
        await broker.replica_manager.wait_for_data(remaining)
    if account is not None:

        def answer_size() -> int:
            """The size of the answer it would get, read without telling its session."""
            would = _by_topic(context.would_answer(reads))
            return RawResponse(encode_fetch_response(version, would)).size

        throttle_ms = account.settle_fetch(answer_size)
        if throttle_ms:
            session_id = context.throttled_session_id()
            empty = encode_fetch_response(
                version, [], throttle_time_ms=throttle_ms, session_id=session_id
            )
            return RawResponse(empty, [ErrorCode.NONE] if version >= 7 else [])
    session_id, answered = context.respond(reads)
    topics = _by_topic(answered)
    if request.replica_id < 0:
        stats = broker.replica_manager.topic_stats
        for topic in topics:
            for p in topic.partitions:
                if p.records:
                    stats.fetched(topic.name, p.offsets_sent, p.records_size)
    # Kafka counts the answer's top-level error (v7+) with each partition's.
    codes = [ErrorCode.NONE] if version >= 7 else []
    codes += [p.error_code for topic in topics for p in topic.partitions]
    return RawResponse(encode_fetch_response(version, topics, session_id=session_id), codes)
