"""The fetcher's side of a fetch session (KIP-227; Kafka's FetchSessionHandler).

One handler per broker fetched from (the consumer's, and each replica fetcher's). It
remembers what the broker's session holds of each partition as of the last answer, so
the next request lists only partitions whose fetch changed (offset, epochs, limits) and
forgets those no longer fetched; the broker answers only partitions with news. Any
failure starts over with a full fetch that closes the old session and opens a new one."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kafka.protocol.consumer import FetchRequest

from epochlog.protocol.errors import ErrorCode
from epochlog.seams import Clock
from epochlog.seams.waiting import finished_within

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
_MAX_EPOCH = (1 << 31) - 1
# How long closing a fetcher waits for brokers to close its sessions: a broker that does
# not answer by then frees the slot when it evicts the session.
CLOSE_SESSIONS_S = 1.0


@dataclass(frozen=True, slots=True)
class PartitionFetch:
    """What a fetch asks of one partition; a change from the last one sent is sent."""

    topic: str
    topic_id: uuid.UUID | None
    partition: int
    fetch_offset: int
    current_leader_epoch: int
    last_fetched_epoch: int
    log_start_offset: int
    partition_max_bytes: int

    @property
    def key(self) -> tuple[str, int]:
        return (self.topic, self.partition)


@dataclass(frozen=True, slots=True)
class FetchPlan:
    """One request's session fields, what it lists, and what it forgets."""

    session_id: int
    epoch: int
    wanted: dict[tuple[str, int], PartitionFetch]
    send: list[PartitionFetch]
    forget: list[PartitionFetch]
    uses_topic_ids: bool

    @property
    def full(self) -> bool:
        return self.epoch in (INITIAL_EPOCH, FINAL_EPOCH)


class FetchSessionHandler:
    """The session this fetcher holds with one broker, one request at a time."""

    def __init__(self) -> None:
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        self._known: dict[tuple[str, int], PartitionFetch] = {}
        self._uses_topic_ids = False

    def plan(self, wanted: Iterable[PartitionFetch], uses_topic_ids: bool) -> FetchPlan:
        """The next request: in full when there is no session yet (or its topic-id use
        changed), else what changed since the last answer and what left."""
        by_key = {p.key: p for p in wanted}
        if uses_topic_ids != self._uses_topic_ids:
            self.epoch = INITIAL_EPOCH
            self._uses_topic_ids = uses_topic_ids
        if self.epoch == INITIAL_EPOCH:
            return FetchPlan(
                self.session_id, INITIAL_EPOCH, by_key, list(by_key.values()), [], uses_topic_ids
            )
        send = [p for key, p in by_key.items() if self._known.get(key) != p]
        forget = [p for key, p in self._known.items() if key not in by_key]
        return FetchPlan(self.session_id, self.epoch, by_key, send, forget, uses_topic_ids)

    def answered(self, plan: FetchPlan, response: Any) -> bool:
        """Take the broker's answer to ``plan``; False if it refused the session (the
        next request is then full)."""
        if response.error_code != ErrorCode.NONE:
            # FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH or
            # FETCH_SESSION_TOPIC_ID_ERROR: the answer has no partitions.
            if response.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND:
                self.session_id = INVALID_SESSION_ID
            self.failed()
            return False
        if response.session_id == INVALID_SESSION_ID:
            # No session (the broker has no slot, or closed it): full fetches from now.
            self.session_id = INVALID_SESSION_ID
            self.failed()
            return True
        if plan.full:
            self.session_id = response.session_id
            self.epoch = 1
        else:
            self.epoch = 1 if self.epoch == _MAX_EPOCH else self.epoch + 1
        self._known = dict(plan.wanted)
        return True

    def closing(self) -> FetchPlan | None:
        """The request that closes the broker's session (the final epoch, nothing
        listed), or None when there is none to close."""
        if self.session_id == INVALID_SESSION_ID:
            return None
        return FetchPlan(self.session_id, FINAL_EPOCH, {}, [], [], self._uses_topic_ids)

    def failed(self) -> None:
        """No answer, or one that cannot be trusted: the next request is full, closing
        the session the broker may still hold."""
        self.epoch = INITIAL_EPOCH
        self._known = {}


def fetch_request(
    plan: FetchPlan,
    *,
    replica_id: int,
    max_wait_ms: int,
    min_bytes: int,
    max_bytes: int,
    isolation_level: int,
    rack_id: str = "",
) -> FetchRequest:
    """The Fetch request of ``plan`` (topics by id for v13, by name before); ``rack_id``
    is a consumer's client.rack (KIP-392)."""
    fetch_topic = FetchRequest.FetchTopic
    by_topic: dict[str, list[PartitionFetch]] = {}
    for p in plan.send:
        by_topic.setdefault(p.topic, []).append(p)
    forgotten: dict[str, list[PartitionFetch]] = {}
    for p in plan.forget:
        forgotten.setdefault(p.topic, []).append(p)
    return FetchRequest(
        replica_id=replica_id,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=isolation_level,
        session_id=plan.session_id,
        session_epoch=plan.epoch,
        topics=[
            fetch_topic(
                topic=topic,
                topic_id=parts[0].topic_id,
                partitions=[
                    fetch_topic.FetchPartition(
                        partition=p.partition,
                        current_leader_epoch=p.current_leader_epoch,
                        fetch_offset=p.fetch_offset,
                        last_fetched_epoch=p.last_fetched_epoch,
                        log_start_offset=p.log_start_offset,
                        partition_max_bytes=p.partition_max_bytes,
                    )
                    for p in parts
                ],
            )
            for topic, parts in by_topic.items()
        ],
        forgotten_topics_data=[
            FetchRequest.ForgottenTopic(
                topic=topic, topic_id=parts[0].topic_id, partitions=[p.partition for p in parts]
            )
            for topic, parts in forgotten.items()
        ],
        rack_id=rack_id,
    )


async def close_sessions(
    handlers: Mapping[int, FetchSessionHandler],
    send: Callable[[int, FetchRequest, int], Awaitable[Any]],
    versions: tuple[int, int],
    clock: Clock,
) -> None:
    """Close every session the handlers hold (a fetch in the final epoch to each broker,
    as Kafka's consumer sends when it closes), so the brokers' slots are free at once.
    ``versions``: the Fetch version by topic name, and by topic id."""
    sends = []
    for broker, handler in sorted(handlers.items()):
        plan = handler.closing()
        if plan is not None:
            request = fetch_request(
                plan, replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1, isolation_level=0
            )
            sends.append(send(broker, request, versions[plan.uses_topic_ids]))
        handler.session_id = INVALID_SESSION_ID
        handler.failed()
    if sends:
        closing = asyncio.gather(*sends, return_exceptions=True)
        if not await finished_within(clock, closing, CLOSE_SESSIONS_S):
            closing.cancel()
