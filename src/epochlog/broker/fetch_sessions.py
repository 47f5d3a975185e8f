"""Incremental fetch sessions (KIP-227), the broker's side, with no I/O.

A fetcher of many quiet partitions would otherwise send and be answered every partition
on every fetch. A session keeps, per fetcher, the partitions it fetches with what it
last asked of each and what it was last told, so an incremental request lists only
what changed and its answer carries only partitions with news. The rules are Kafka's
(``FetchSession.scala``): session id 0 with epoch 0 is a full fetch that creates a
session if a slot is free, epoch -1 a full fetch without one (closing the session it
names), anything else an incremental fetch in the session it names at the epoch it
expects. Slots are bounded by ``max.incremental.fetch.session.cache.slots``; when they
are full a stale session goes first, then the smallest evictable one (followers'
sessions are privileged, and any session younger than
``MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS`` is safe from clients')."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from epochlog.protocol.errors import ErrorCode, KafkaError
from epochlog.protocol.fetch_response import PartitionData
from epochlog.seams import Clock, Random

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
# Kafka's KafkaServer.MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS: a constant there too.
MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS = 120_000
_MAX_EPOCH = (1 << 31) - 1

# A partition of a session: (topic id, partition) for v13+, (topic name, partition) before.
PartitionKey = tuple[Any, int]


def next_epoch(epoch: int) -> int:
    """The epoch a session expects after ``epoch`` (it wraps to 1, never to 0 or -1)."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == _MAX_EPOCH else epoch + 1


@dataclass(slots=True)
class CachedPartition:
    """What a fetcher last asked of one partition, and what it was last told of it."""

    topic: str | None
    topic_id: uuid.UUID
    partition: int
    fetch_offset: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    log_start_offset: int = -1
    partition_max_bytes: int = 0
    # Last told; -1 until the first answer, so a new partition is always answered.
    high_watermark: int = -1
    last_stable_offset: int = -1
    leader_log_start_offset: int = -1
    leader_epoch: int = -1

    def key(self, uses_topic_ids: bool) -> PartitionKey:
        return (self.topic_id if uses_topic_ids else self.topic, self.partition)

    def update_request(self, asked: CachedPartition) -> None:
        self.fetch_offset = asked.fetch_offset
        self.current_leader_epoch = asked.current_leader_epoch
        self.last_fetched_epoch = asked.last_fetched_epoch
        self.log_start_offset = asked.log_start_offset
        self.partition_max_bytes = asked.partition_max_bytes
        if asked.topic is not None:
            self.topic = asked.topic

    def has_news(self, data: PartitionData, leader_epoch: int) -> bool:
        """Whether an incremental answer would carry this partition."""
        return (
            bool(data.records)
            or data.diverging_epoch is not None
            or data.preferred_read_replica >= 0
            or data.error_code != 0
            or self.high_watermark != data.high_watermark
            or self.last_stable_offset != data.last_stable_offset
            or self.leader_log_start_offset != data.log_start_offset
            # A fetcher that sends no CurrentLeaderEpoch still hears of a new leader epoch.
            or self.leader_epoch != leader_epoch
        )

    def must_answer(self, data: PartitionData, leader_epoch: int) -> bool:
        """Whether an incremental answer carries this partition; what it carries becomes
        what the fetcher was last told. Errors reset the high watermark told, so the
        partition is answered again once the error is gone (as Kafka does)."""
        answer = self.has_news(data, leader_epoch)
        if data.error_code != 0:
            self.high_watermark = -1
        else:
            self.high_watermark = data.high_watermark
            self.last_stable_offset = data.last_stable_offset
            self.leader_log_start_offset = data.log_start_offset
            self.leader_epoch = leader_epoch
        return answer


@dataclass(slots=True)
class FetchSession:
    id: int
    privileged: bool
    uses_topic_ids: bool
    partitions: dict[PartitionKey, CachedPartition]
    creation_ms: int
    last_used_ms: int
    epoch: int = field(default=next_epoch(INITIAL_EPOCH))

    def eviction_key(self) -> tuple[bool, int, int]:
        """Kafka's EvictableKey: unprivileged, then smaller sessions go first."""
        return (self.privileged, len(self.partitions), self.id)


class FetchContext:
    """One Fetch's view of sessions: which partitions it reads, and what it answers."""

    def __init__(
        self,
        cache: FetchSessionCache,
        partitions: list[CachedPartition],
        *,
        session: FetchSession | None = None,
        create: bool = False,
        privileged: bool = False,
        uses_topic_ids: bool = False,
    ) -> None:
        self.partitions = partitions
        self._cache = cache
        self._session = session
        self._create = create
        self._privileged = privileged
        self._uses_topic_ids = uses_topic_ids

    @property
    def incremental(self) -> bool:
        return self._session is not None

    def would_answer(
        self, results: list[tuple[CachedPartition, PartitionData, int]]
    ) -> list[tuple[CachedPartition, PartitionData]]:
        """What ``respond`` would answer, leaving every session as it is (the size a
        consumer's fetch is charged before it is known whether it is answered)."""
        if self._session is None:
            return [(cached, data) for cached, data, _ in results]
        return [(c, d) for c, d, epoch in results if c.has_news(d, epoch)]

    def throttled_session_id(self) -> int:
        """The session id of a throttled answer, which carries no partitions: a full
        fetch opens no session (it will be asked again), an incremental one stays in its
        session, whose partitions keep what they were last told (Kafka's
        getThrottledResponse)."""
        return self._session.id if self._session is not None else INVALID_SESSION_ID

    def respond(
        self, results: list[tuple[CachedPartition, PartitionData, int]]
    ) -> tuple[int, list[tuple[CachedPartition, PartitionData]]]:
        """The answer's session id and the partitions it carries, from what was read of
        each partition (with its leader epoch, -1 when it has none here)."""
        if self._session is None:
            session_id = INVALID_SESSION_ID
            if self._create:
                for cached, data, leader_epoch in results:
                    cached.must_answer(data, leader_epoch)
                session_id = self._cache.maybe_create(
                    self._privileged, self._uses_topic_ids, [c for c, _, _ in results]
                )
            return session_id, [(cached, data) for cached, data, _ in results]
        session = self._session
        answered = []
        for cached, data, leader_epoch in results:
            if cached.must_answer(data, leader_epoch):
                answered.append((cached, data))
                if data.records:
                    # Partitions with data move to the end, so max_bytes starves none.
                    key = cached.key(session.uses_topic_ids)
                    if session.partitions.get(key) is cached:
                        del session.partitions[key]
                        session.partitions[key] = cached
        return session.id, answered


class FetchSessionCache:
    """Every fetch session of a broker, bounded by its slots."""

    def __init__(
        self,
        max_slots: int,
        clock: Clock,
        random: Random,
        eviction_ms: int = MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS,
    ) -> None:
        self.max_slots = max_slots
        self._clock = clock
        self._random = random
        self._eviction_ms = eviction_ms
        self._sessions: dict[int, FetchSession] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def sessions(self) -> list[FetchSession]:
        return list(self._sessions.values())

    def get(self, session_id: int) -> FetchSession | None:
        return self._sessions.get(session_id)

    def _now_ms(self) -> int:
        return int(self._clock.monotonic() * 1000)

    def new_context(
        self,
        session_id: int,
        epoch: int,
        asked: list[CachedPartition],
        forgotten: Iterable[PartitionKey],
        *,
        privileged: bool,
        uses_topic_ids: bool,
    ) -> FetchContext:
        """The context of a Fetch with this session id and epoch. Raises KafkaError
        (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH,
        FETCH_SESSION_TOPIC_ID_ERROR) for a request its session cannot serve; a refused
        request leaves every session as it was."""
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                # A full fetch naming a session closes it.
                self._sessions.pop(session_id, None)
            return FetchContext(
                self,
                asked,
                create=epoch == INITIAL_EPOCH and self.max_slots > 0,
                privileged=privileged,
                uses_topic_ids=uses_topic_ids,
            )
        session = self._sessions.get(session_id)
        if session is None:
            raise KafkaError(ErrorCode.FETCH_SESSION_ID_NOT_FOUND, f"no fetch session {session_id}")
        if session.epoch != epoch:
            raise KafkaError(
                ErrorCode.INVALID_FETCH_SESSION_EPOCH,
                f"fetch session {session_id} expects epoch {session.epoch}, not {epoch}",
            )
        if session.uses_topic_ids != uses_topic_ids:
            raise KafkaError(
                ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR,
                f"fetch session {session_id} was created "
                + ("with" if session.uses_topic_ids else "without")
                + " topic ids",
            )
        for cached in asked:
            key = cached.key(uses_topic_ids)
            known = session.partitions.get(key)
            if known is None:
                session.partitions[key] = cached
            else:
                known.update_request(cached)
        for key in forgotten:
            session.partitions.pop(key, None)
        session.epoch = next_epoch(session.epoch)
        session.last_used_ms = self._now_ms()
        return FetchContext(self, list(session.partitions.values()), session=session)

    def maybe_create(
        self, privileged: bool, uses_topic_ids: bool, partitions: list[CachedPartition]
    ) -> int:
        """A new session's id, or 0 when no slot is free nor can be freed."""
        now = self._now_ms()
        if len(self._sessions) >= self.max_slots and not self._try_evict(
            privileged, len(partitions), now
        ):
            return INVALID_SESSION_ID
        session_id = self._new_id()
        by_key = {p.key(uses_topic_ids): p for p in partitions}
        self._sessions[session_id] = FetchSession(
            session_id, privileged, uses_topic_ids, by_key, now, now
        )
        return session_id

    def _try_evict(self, privileged: bool, size: int, now: int) -> bool:
        """Kafka's rule: the least recently used session if it is stale; otherwise the
        first evictable session if the new one is worth more (privileged, then larger)."""
        oldest = min(self._sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now - oldest.last_used_ms > self._eviction_ms:
            del self._sessions[oldest.id]
            return True
        candidates = [
            s
            for s in self._sessions.values()
            if now - s.creation_ms > self._eviction_ms or (privileged and not s.privileged)
        ]
        if not candidates:
            return False
        victim = min(candidates, key=FetchSession.eviction_key)
        if (privileged, size) <= victim.eviction_key()[:2]:
            return False
        del self._sessions[victim.id]
        return True

    def _new_id(self) -> int:
        while True:
            session_id = self._random.randint(1, _MAX_EPOCH)
            if session_id not in self._sessions:
                return session_id
