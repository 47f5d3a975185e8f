"""Several replica managers in one event loop, each served on its own loopback port by
the real request channel, with a stand-in for the controller that decides partition
states and delivers them to the brokers it chooses (so a test can make one learn late).
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import functools
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafka.protocol.consumer import ListOffsetsRequest
from kafka.protocol.producer import ProduceRequest
from prometheus_client import CollectorRegistry

from epochlog.broker.fetch_sessions import FetchSessionCache
from epochlog.broker.handlers import (
    Handler,
    fetch,
    list_offsets,
    offset_for_leader_epoch,
    produce,
)
from epochlog.broker.server import ConnectionLoop, RequestChannel
from epochlog.client.connection import BrokerConnection
from epochlog.metadata.model import BrokerEndpoint, PartitionState
from epochlog.metrics.requests import RequestMetrics
from epochlog.protocol.records import build_batch
from epochlog.replication.replica_manager import ReplicaManager
from epochlog.replication.settings import ReplicationSettings
from epochlog.seams import Seams, Server
from epochlog.seams.real import real_seams
from epochlog.security.listeners import Listener
from epochlog.security.principal import PrincipalMapper
from epochlog.settings.broker import BROKER
from epochlog.storage.config import LogConfig
from epochlog.storage.log_manager import LogManager
from epochlog.txn.verification import TransactionVerifier
from support.records import values_of
from support.requests import fetch_request

HANDLERS = {
    m.API.key: Handler(m.API, m.handle)
    for m in (produce, fetch, list_offsets, offset_for_leader_epoch)
}
FAST = {"replica.fetch.wait.max.ms": "100", "replica.fetch.backoff.ms": "50"}


@dataclass
class Topic:
    """The part of the controller's topic metadata that apply_topic reads."""

    name: str
    topic_id: uuid.UUID
    partitions: dict[int, PartitionState]
    configs: dict[str, str] = field(default_factory=dict)


class Topics:
    """The metadata-cache calls the Fetch handler makes, and the brokers with their racks
    (``Cluster.racks``) that a KIP-392 replica selector chooses among."""

    def __init__(self) -> None:
        self.by_name: dict[str, Topic] = {}
        self.brokers: dict[int, BrokerEndpoint] = {}

    def topic(self, name: str) -> Topic | None:
        return self.by_name.get(name)

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return next((t.name for t in self.by_name.values() if t.topic_id == topic_id), None)


class Node:
    """One broker's replication stack: what the request handlers see as ``broker``."""

    def __init__(self, cluster: Cluster, broker_id: int, log_dir: Path) -> None:
        self.cluster = cluster
        self.broker_id = broker_id
        self.log_dir = log_dir
        self.seams: Seams = real_seams(seed=broker_id)
        self.metadata_cache = Topics()
        self.endpoint: BrokerEndpoint | None = None
        self.authorizer = None  # no authorizer: every request is allowed, as by default
        self.port = 0
        self.running = False
        self._server: Server | None = None
        self._connections: ConnectionLoop | None = None

    async def start(self) -> None:
        self.log_manager = LogManager(self.seams.disk, self.seams.clock, self.log_dirs, LogConfig())
        self.log_manager.start()
        settings = BROKER.parse(self.cluster.settings)
        # Fetch sessions live in memory: a restarted broker starts with none.
        self.fetch_sessions = FetchSessionCache(
            settings["max.incremental.fetch.session.cache.slots"],
            self.seams.clock,
            self.seams.random,
        )
        self.replica_manager = ReplicaManager(
            self.broker_id,
            self.log_manager,
            self.seams,
            ReplicationSettings.from_settings(settings),
            self.cluster.endpoint_of,
            self.cluster.propose_isr,
        )
        # No transaction coordinator here: transactions are not verified (KIP-890).
        self.txn_verifier = TransactionVerifier(
            self.seams.network, self.seams.clock, lambda _id: None, False, 30_000
        )
        self._connections = ConnectionLoop(
            RequestChannel(HANDLERS, self, self.seams.clock, RequestMetrics(CollectorRegistry())),
            self.seams.clock,
            1 << 30,
            600,
            30,
        )
        self._server = await self.seams.network.serve(
            "127.0.0.1",
            0,
            functools.partial(
                self._connections.serve,
                listener=Listener("PLAINTEXT", "127.0.0.1", 0),
                mapper=PrincipalMapper.parse("DEFAULT"),
            ),
        )
        self.port = self._server.port
        rack = self.cluster.racks.get(self.broker_id)
        self.endpoint = BrokerEndpoint(self.broker_id, "127.0.0.1", self.port, rack)
        await self.replica_manager.start()
        self.running = True

    async def stop(self) -> None:
        """Like a broker process going away: listener and connections closed at once."""
        self.running = False
        assert self._server is not None and self._connections is not None
        self._server.close()
        for conn in list(self._connections.open_connections):
            conn.close()
        await self.replica_manager.stop()
        self.log_manager.close()

    @property
    def log_dirs(self) -> list[str]:
        """``log_dir``, then ``log_dir-1``... as many as the cluster gives each node."""
        extra = [f"{self.log_dir}-{n}" for n in range(1, self.cluster.log_dirs)]
        return [str(self.log_dir), *extra]

    def partition(self, topic: str = "t", index: int = 0) -> Any:
        return self.replica_manager.partition(topic, index)

    async def connect(self) -> BrokerConnection:
        return await BrokerConnection.open(self.seams.network, "127.0.0.1", self.port)


class Cluster:
    """The test's controller: partition states, ISR compare-and-set, delivery."""

    def __init__(
        self,
        base: Path,
        size: int = 3,
        racks: dict[int, str] | None = None,
        log_dirs: int = 1,
        **settings: str,
    ) -> None:
        self.settings = {**FAST, **settings}
        self.racks = dict(racks or {})
        self.log_dirs = log_dirs
        self.nodes = {i: Node(self, i, base / f"broker{i}") for i in range(size)}
        self.topics: dict[str, Topic] = {}
        self.proposals: list[tuple[int, list[int], bool]] = []

    async def __aenter__(self) -> Cluster:
        for node in self.nodes.values():
            await node.start()
        endpoints = {i: n.endpoint for i, n in self.nodes.items() if n.endpoint is not None}
        for node in self.nodes.values():
            node.metadata_cache.brokers = dict(endpoints)
        return self

    async def __aexit__(self, *exc: object) -> None:
        for node in self.nodes.values():
            if node.running:
                await node.stop()

    def endpoint_of(self, broker_id: int) -> tuple[str, int] | None:
        node = self.nodes.get(broker_id)
        return ("127.0.0.1", node.port) if node is not None and node.port else None

    def create(self, name: str, leader: int = 0, isr: list[int] | None = None, **configs: str):
        replicas = sorted(self.nodes)
        state = PartitionState(leader, 0, replicas, list(isr or replicas))
        self.topics[name] = Topic(name, uuid.uuid4(), {0: state}, dict(configs))
        self.publish(name)

    def state(self, name: str = "t") -> PartitionState:
        return self.topics[name].partitions[0]

    def change(self, name: str = "t", to: list[int] | None = None, **fields: Any) -> None:
        """A new state (partition epoch bumped; leader epoch too if the leader changes)."""
        old = self.state(name)
        bump = 1 if "leader" in fields else 0
        new = dataclasses.replace(
            old,
            leader_epoch=old.leader_epoch + bump,
            partition_epoch=old.partition_epoch + 1,
            **fields,
        )
        self.topics[name].partitions[0] = new
        self.publish(name, to)

    def publish(self, name: str, to: list[int] | None = None) -> None:
        topic = self.topics[name]
        for broker_id in to if to is not None else list(self.nodes):
            node = self.nodes[broker_id]
            if node.running:
                view = copy.deepcopy(topic)
                node.metadata_cache.by_name[name] = view
                config = LogConfig().with_overrides(view.configs)
                node.replica_manager.apply_topic(view, config)  # type: ignore[arg-type]

    async def propose_isr(
        self, name: str, index: int, leader_epoch: int, partition_epoch: int, new_isr: list[int]
    ) -> PartitionState | None:
        """Compare-and-set on the partition epoch; offline replicas never join."""
        current = self.state(name)
        accepted = (current.leader_epoch, current.partition_epoch) == (
            leader_epoch,
            partition_epoch,
        ) and not set(new_isr) & set(current.offline_replicas)
        self.proposals.append((partition_epoch, list(new_isr), accepted))
        if not accepted:
            return None
        self.change(name, isr=list(new_isr))
        return self.state(name)


def batch(values: list[bytes]) -> bytes:
    return build_batch([(None, v, [], 1_700_000_000_000 + i) for i, v in enumerate(values)])


def values_in(log: Any, start: int = 0) -> list[tuple[int, bytes]]:
    """(offset, value) of every record of a log from ``start``, read from disk."""
    read = log.read(start, 1 << 30, max_offset=None)
    return [pair for s in read.slices for pair in values_of(s.file.pread(s.size, s.position))]


async def produce_to(
    node: Node, values: list[bytes], acks: int = -1, timeout_ms: int = 10_000, topic: str = "t"
) -> Any:
    conn = await node.connect()
    try:
        request = ProduceRequest(
            transactional_id=None,
            acks=acks,
            timeout_ms=timeout_ms,
            topic_data=[
                ProduceRequest.TopicProduceData(
                    name=topic,
                    partition_data=[
                        ProduceRequest.TopicProduceData.PartitionProduceData(
                            index=0, records=batch(values)
                        )
                    ],
                )
            ],
        )
        response = await conn.send(request, 9)
        return response.responses[0].partition_responses[0]
    finally:
        await conn.close()


async def fetch_from(node: Node, offset: int, version: int = 12, **kwargs: Any) -> Any:
    conn = await node.connect()
    try:
        response = await conn.send(fetch_request("t", offset, **kwargs), version)
        return response.responses[0].partitions[0]
    finally:
        await conn.close()


async def list_latest(node: Node, replica_id: int = -1) -> Any:
    conn = await node.connect()
    try:
        request = ListOffsetsRequest(
            replica_id=replica_id,
            isolation_level=0,
            topics=[
                ListOffsetsRequest.ListOffsetsTopic(
                    name="t",
                    partitions=[
                        ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
                            partition_index=0, current_leader_epoch=-1, timestamp=-1
                        )
                    ],
                )
            ],
        )
        response = await conn.send(request, 7)
        return response.topics[0].partitions[0]
    finally:
        await conn.close()


async def eventually(condition: Callable[[], bool | Awaitable[bool]], what: str) -> None:
    """Poll ``condition`` until it holds; a bounded wait, not a timing assertion."""
    for _ in range(1000):
        result = condition()
        if not isinstance(result, bool):
            result = await result
        if result:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never happened: {what}")


def run(scenario: Callable[[], Awaitable[Any]]) -> Any:
    return asyncio.run(asyncio.wait_for(scenario(), 60))
