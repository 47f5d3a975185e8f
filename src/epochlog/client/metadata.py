"""What the client knows of the cluster: brokers, leaders with their epochs, topic IDs.

KIP-232: a Metadata answer giving a lower leader epoch for a partition than the one
held is refused (brokers learn leader changes at different moments) and fetched again
with backoff, preferably from another broker. A topic in use whose ID changed was
deleted and re-created: that raises, naming the partitions, instead of silently reading
the new topic from the old one's offsets. ``MetadataCache`` decides (no I/O);
``Cluster`` asks brokers and keeps one connection per broker.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kafka.protocol.metadata import MetadataRequest

from epochlog.client.connection import BrokerConnection
from epochlog.client.errors import (
    KafkaClientError,
    StaleMetadataError,
    TopicIdChangedError,
    TopicPartition,
)
from epochlog.protocol.errors import ErrorCode
from epochlog.seams import Clock, Network

log = logging.getLogger("epochlog.client.metadata")

METADATA_VERSION = 12
ZERO_UUID = uuid.UUID(int=0)
# Topic errors worth waiting out (a topic being created or electing its leaders).
RETRIABLE_TOPIC_ERRORS = {
    ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
}


@dataclass(frozen=True)
class PartitionMetadata:
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    error: ErrorCode = ErrorCode.NONE


@dataclass
class TopicMetadata:
    name: str
    topic_id: uuid.UUID
    partitions: dict[int, PartitionMetadata]
    error: ErrorCode = ErrorCode.NONE


@dataclass
class MetadataSnapshot:
    """One Metadata answer, decoded."""

    brokers: dict[int, tuple[str, int]]
    topics: dict[str, TopicMetadata]
    controller_id: int = -1
    cluster_id: str | None = None


@dataclass
class Refusal:
    """Why an answer was refused: (partition, held epoch, answered epoch) each."""

    stale: list[tuple[TopicPartition, int, int]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.stale)

    def __str__(self) -> str:
        return ", ".join(f"{tp} epoch {new} < held {held}" for tp, held, new in self.stale)


def snapshot_from_response(response: Any) -> MetadataSnapshot:
    topics = {}
    for t in response.topics:
        if t.name is None:
            continue
        topics[t.name] = TopicMetadata(
            t.name,
            t.topic_id or ZERO_UUID,
            {
                p.partition_index: PartitionMetadata(
                    p.partition_index,
                    p.leader_id,
                    p.leader_epoch,
                    tuple(p.replica_nodes),
                    tuple(p.isr_nodes),
                    ErrorCode(p.error_code),
                )
                for p in t.partitions
            },
            ErrorCode(t.error_code),
        )
    return MetadataSnapshot(
        {b.node_id: (b.host, b.port) for b in response.brokers},
        topics,
        response.controller_id,
        response.cluster_id,
    )


class MetadataCache:
    """The metadata the client holds, and the KIP-232 rules for accepting more."""

    def __init__(self) -> None:
        self.brokers: dict[int, tuple[str, int]] = {}
        self.topics: dict[str, TopicMetadata] = {}
        # Each held topic's partition count (topics with partitions only): the producer
        # reads it for every record sent, so a dict lookup, no call. Updated in place;
        # on_count_change is called when a count changes or goes.
        self.partition_counts: dict[str, int] = {}
        self.on_count_change: Callable[[], object] | None = None

    def check(self, answer: MetadataSnapshot, in_use: Iterable[TopicPartition] = ()) -> Refusal:
        """Raise TopicIdChangedError for a re-created topic in use; return the stale
        partitions (empty: the answer may be applied)."""
        in_use = set(in_use)
        refusal = Refusal()
        for name, topic in answer.topics.items():
            held = self.topics.get(name)
            if held is None or topic.error != ErrorCode.NONE:
                continue
            if held.topic_id != topic.topic_id and ZERO_UUID not in (held.topic_id, topic.topic_id):
                used = sorted(tp for tp in in_use if tp.topic == name)
                if used:
                    raise TopicIdChangedError(name, held.topic_id, topic.topic_id, used)
                continue  # not read by us: the new topic simply replaces the old
            for index, part in topic.partitions.items():
                old = held.partitions.get(index)
                if old is not None and part.leader_epoch < old.leader_epoch:
                    refusal.stale.append(
                        (TopicPartition(name, index), old.leader_epoch, part.leader_epoch)
                    )
        return refusal

    def apply(self, answer: MetadataSnapshot) -> None:
        if answer.brokers:
            self.brokers = dict(answer.brokers)
        for name, topic in answer.topics.items():
            if topic.error == ErrorCode.NONE:
                self.topics[name] = topic
                self._count(name, len(topic.partitions))
            elif topic.error not in RETRIABLE_TOPIC_ERRORS:
                self.topics.pop(name, None)
                self._count(name, 0)

    def _count(self, topic: str, count: int) -> None:
        if self.partition_counts.get(topic, 0) == count:
            return
        if count:
            self.partition_counts[topic] = count
        else:
            del self.partition_counts[topic]
        if self.on_count_change is not None:
            self.on_count_change()

    def partition(self, tp: TopicPartition) -> PartitionMetadata | None:
        topic = self.topics.get(tp.topic)
        return None if topic is None else topic.partitions.get(tp.partition)

    def topic_id(self, topic: str) -> uuid.UUID | None:
        """The held topic ID (None if unknown or not given): Fetch by ID never reads a
        re-created topic as the one the positions belong to."""
        t = self.topics.get(topic)
        return None if t is None or t.topic_id == ZERO_UUID else t.topic_id

    def partition_count(self, topic: str) -> int | None:
        return self.partition_counts.get(topic)


def backoff_seconds(attempt: int, base_ms: int, max_ms: int) -> float:
    """Exponential backoff, doubling from ``retry.backoff.ms`` up to its maximum."""
    return min(max_ms, base_ms * (2 ** min(attempt, 16))) / 1000


class Cluster:
    """Connections to brokers and the metadata cache, shared by one client."""

    def __init__(
        self,
        network: Network,
        clock: Clock,
        bootstrap: list[tuple[str, int]],
        client_id: str = "epochlog",
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int = 1000,
        request_timeout_ms: int = 30000,
        *,
        auto_create_topics: bool = False,
    ) -> None:
        self.network = network
        # Metadata's allow_auto_topic_creation: a producer's asks the broker to create a
        # missing topic (its auto.create.topics.enable decides), as Kafka's producers do.
        self._auto_create_topics = auto_create_topics
        self.clock = clock
        self.cache = MetadataCache()
        self._bootstrap = bootstrap
        self._client_id = client_id
        self._backoff = (retry_backoff_ms, retry_backoff_max_ms)
        self.request_timeout_s = request_timeout_ms / 1000
        self._connections: dict[tuple[str, int], BrokerConnection] = {}
        self._closed = False
        self._rotation = 0

    async def connection_to(self, address: tuple[str, int]) -> BrokerConnection:
        conn = self._connections.get(address)
        if conn is None or conn.closed:
            conn = await BrokerConnection.open(
                self.network, *address, client_id=self._client_id, clock=self.clock
            )
            # A call still under way when the client closed, or a twin call that got
            # there first: this connection must not outlive it unowned.
            kept = self._connections.get(address)
            if self._closed or (kept is not None and not kept.closed):
                await conn.close()
                if kept is None or kept.closed:
                    raise ConnectionError("client closed")
                return kept
            self._connections[address] = conn
        return conn

    async def broker(self, broker_id: int) -> BrokerConnection:
        address = self.cache.brokers.get(broker_id)
        if address is None:
            raise ConnectionError(f"broker {broker_id} is not in the metadata")
        return await self.connection_to(address)

    async def send(self, broker_id: int, request: Any, version: int) -> Any:
        """A request to one broker; a broken connection is dropped and re-raised."""
        conn = await self.broker(broker_id)
        try:
            return await conn.send(request, version)
        except (ConnectionError, OSError):
            await self.drop(broker_id)
            raise

    async def drop(self, broker_id: int) -> None:
        address = self.cache.brokers.get(broker_id)
        conn = self._connections.pop(address, None) if address else None
        if conn is not None:
            await conn.close()

    def _candidates(self) -> list[tuple[str, int]]:
        known = sorted(self.cache.brokers.values())
        addresses = known + [a for a in self._bootstrap if a not in known]
        start = self._rotation % len(addresses)
        return addresses[start:] + addresses[:start]

    async def _ask(self, topics: list[str] | None) -> MetadataSnapshot:
        request = MetadataRequest(
            topics=None
            if topics is None
            else [MetadataRequest.MetadataRequestTopic(name=t, topic_id=None) for t in topics],
            allow_auto_topic_creation=self._auto_create_topics,
            include_topic_authorized_operations=False,
        )
        errors = []
        for address in self._candidates():
            try:
                # Bounded: a frozen broker (alive, answering nobody) must not hold every
                # later lookup; TimeoutError is an OSError, so the next broker is asked.
                async with self.clock.timeout(self.request_timeout_s):
                    conn = await self.connection_to(address)
                    return snapshot_from_response(await conn.send(request, METADATA_VERSION))
            except (ConnectionError, OSError) as exc:
                errors.append(f"{address[0]}:{address[1]}: {exc or type(exc).__name__}")
                dropped = self._connections.pop(address, None)
                if dropped is not None:
                    await dropped.close()
        raise ConnectionError("no broker answered Metadata: " + "; ".join(errors))

    async def refresh(
        self,
        topics: Iterable[str],
        in_use: Iterable[TopicPartition] = (),
        attempts: int = 10,
    ) -> MetadataSnapshot:
        """Fetch metadata for ``topics`` and apply it, refusing stale answers (KIP-232)
        and trying again with backoff, from the next broker each time."""
        names = sorted(set(topics))
        in_use = list(in_use)
        refusal = Refusal()
        for attempt in range(attempts):
            answer = await self._ask(names)
            refusal = self.cache.check(answer, in_use)
            if not refusal:
                self.cache.apply(answer)
                return answer
            log.info("refused stale metadata (%s); asking again", refusal)
            self._rotation += 1
            await self.clock.sleep(backoff_seconds(attempt, *self._backoff))
        raise StaleMetadataError(f"metadata stayed older than held: {refusal}")

    async def wait_for_topics(self, topics: Iterable[str], timeout_s: float) -> None:
        """Refresh until every topic is known with a leader for each partition."""
        names = sorted(set(topics))
        deadline = self.clock.monotonic() + timeout_s
        attempt = 0
        while True:
            await self.refresh(names)
            missing = []
            for name in names:
                topic = self.cache.topics.get(name)
                if (
                    topic is None
                    or not topic.partitions
                    or any(p.leader < 0 for p in topic.partitions.values())
                ):
                    missing.append(name)
            if not missing:
                return
            if self.clock.monotonic() >= deadline:
                raise KafkaClientError(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    f"topics without metadata or leaders: {', '.join(missing)}",
                )
            await self.clock.sleep(backoff_seconds(attempt, *self._backoff))
            attempt += 1

    async def close(self) -> None:
        # Taken out first: a task still running may open or drop a connection meanwhile.
        self._closed = True
        connections, self._connections = list(self._connections.values()), {}
        for conn in connections:
            await conn.close()
