"""AsyncAdmin: topics, the cluster with leader epochs, offsets with epochs, consumer
groups and their committed offsets, transactions, ACLs, partition reassignments, log
dirs and client quotas, over the Kafka protocol.
Settings as a dict with Kafka's names like the other clients. Group calls go to each
group's coordinator."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka.protocol.admin import (
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
)
from kafka.protocol.metadata import MetadataRequest

from epochlog.client.admin_acls import AclAdmin
from epochlog.client.admin_groups import GroupAdmin
from epochlog.client.admin_log_dirs import LogDirAdmin
from epochlog.client.admin_quotas import QuotaAdmin
from epochlog.client.admin_reassignments import ReassignmentAdmin
from epochlog.client.admin_transactions import TransactionAdmin
from epochlog.client.admin_users import UserAdmin
from epochlog.client.config import ADMIN, parse_config
from epochlog.client.connection import BrokerConnection
from epochlog.client.errors import TopicPartition
from epochlog.client.lookup import (
    CONSUMER_REPLICA_ID,
    OffsetAndTimestamp,
    list_offsets,
    list_offsets_request,
    offsets_for_leader_epoch_request,
)
from epochlog.client.metadata import Cluster
from epochlog.client.security import client_network
from epochlog.protocol.config_resources import ConfigResource
from epochlog.protocol.errors import ErrorCode, KafkaError
from epochlog.seams import Seams

EARLIEST = -2
LATEST = -1
# Kafka's replica id for tools: a debugging request may ask any replica for its log end.
DEBUGGING_REPLICA_ID = -2


@dataclass
class PartitionInfo:
    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    offline_replicas: list[int]
    error: str | None = None


@dataclass
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: list[PartitionInfo]
    error: str | None = None
    internal: bool = False


@dataclass
class ClusterInfo:
    cluster_id: str | None
    controller_id: int
    brokers: dict[int, tuple[str, int]]
    topics: dict[str, TopicInfo] = field(default_factory=dict)
    racks: dict[int, str | None] = field(default_factory=dict)


DELETE_RECORDS_VERSION = 2


def _raise_for(code: int, what: str) -> None:
    if code != ErrorCode.NONE:
        raise KafkaError(ErrorCode(code), what)


class AsyncAdmin(
    GroupAdmin, TransactionAdmin, UserAdmin, AclAdmin, ReassignmentAdmin, LogDirAdmin, QuotaAdmin
):
    """``AsyncAdmin({"bootstrap.servers": ...}, seams)``: Kafka's admin client on asyncio,
    all its I/O and time through ``seams`` (``real_seams()`` outside a simulation)."""

    def __init__(self, config: Mapping[str, object], seams: Seams) -> None:
        self.config = parse_config(config, ADMIN)
        network = client_network(self.config, seams)
        c = self.config
        self._bootstrap = c["bootstrap.servers"]
        self._brokers: dict[int, tuple[str, int]] = {}
        cluster = Cluster(
            network,
            seams.clock,
            self._bootstrap,
            c["client.id"],
            c["retry.backoff.ms"],
            c["retry.backoff.max.ms"],
            c["request.timeout.ms"],
        )
        super().__init__(cluster, c["request.timeout.ms"] / 1000)

    async def _connection(self, address: tuple[str, int]) -> BrokerConnection:
        return await self._cluster.connection_to(address)

    async def _any(self) -> BrokerConnection:
        errors = []
        for address in list(self._brokers.values()) + self._bootstrap:
            try:
                return await self._connection(address)
            except OSError as exc:
                errors.append(f"{address[0]}:{address[1]}: {exc}")
        raise ConnectionError("no broker reachable: " + "; ".join(errors))

    async def broker(self, broker_id: int) -> BrokerConnection:
        return await self._connection(self._brokers[broker_id])

    async def describe_cluster(
        self, topics: list[str] | None = None, via: int | None = None
    ) -> ClusterInfo:
        """Brokers, controller and topics as one broker sees them; ``via`` names the
        broker to ask (a tool that watches can move on from one that stopped answering)."""
        request = MetadataRequest(
            topics=None
            if topics is None
            else [MetadataRequest.MetadataRequestTopic(name=t, topic_id=None) for t in topics],
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
        conn = await (self._any() if via is None else self.broker(via))
        response = await conn.send(request, 12)
        self._brokers = {b.node_id: (b.host, b.port) for b in response.brokers}
        info = ClusterInfo(
            response.cluster_id,
            response.controller_id,
            dict(self._brokers),
            racks={b.node_id: b.rack for b in response.brokers},
        )
        for topic in response.topics:
            info.topics[topic.name] = TopicInfo(
                topic.name,
                topic.topic_id,
                [
                    PartitionInfo(
                        p.partition_index,
                        p.leader_id,
                        p.leader_epoch,
                        list(p.replica_nodes),
                        list(p.isr_nodes),
                        list(p.offline_replicas),
                        ErrorCode(p.error_code).name if p.error_code else None,
                    )
                    for p in sorted(topic.partitions, key=lambda p: p.partition_index)
                ],
                ErrorCode(topic.error_code).name if topic.error_code else None,
                topic.is_internal,
            )
        return info

    async def create_topic(
        self,
        name: str,
        partitions: int = -1,
        replication_factor: int = -1,
        configs: dict[str, str] | None = None,
        timeout_ms: int = 30000,
    ) -> uuid.UUID:
        request = CreateTopicsRequest(
            topics=[
                CreateTopicsRequest.CreatableTopic(
                    name=name,
                    num_partitions=partitions,
                    replication_factor=replication_factor,
                    assignments=[],
                    configs=[
                        CreateTopicsRequest.CreatableTopic.CreatableTopicConfig(name=k, value=v)
                        for k, v in (configs or {}).items()
                    ],
                )
            ],
            timeout_ms=timeout_ms,
            validate_only=False,
        )
        (result,) = (await (await self._any()).send(request, 7)).topics
        _raise_for(result.error_code, result.error_message or name)
        return result.topic_id

    async def create_partitions(self, name: str, total: int, timeout_ms: int = 30000) -> None:
        """Grow ``name`` to ``total`` partitions (placed by the controller)."""
        request = CreatePartitionsRequest(
            topics=[
                CreatePartitionsRequest.CreatePartitionsTopic(
                    name=name, count=total, assignments=None
                )
            ],
            timeout_ms=timeout_ms,
            validate_only=False,
        )
        (result,) = (await (await self._any()).send(request, 3)).results
        _raise_for(result.error_code, result.error_message or name)

    async def delete_topic(self, name: str, timeout_ms: int = 30000) -> None:
        request = DeleteTopicsRequest(
            topics=[DeleteTopicsRequest.DeleteTopicState(name=name, topic_id=uuid.UUID(int=0))],
            timeout_ms=timeout_ms,
        )
        (result,) = (await (await self._any()).send(request, 6)).responses
        _raise_for(result.error_code, result.error_message or name)

    async def describe_topic_configs(self, name: str) -> dict[str, str]:
        return await self._describe_configs(await self._any(), ConfigResource.TOPIC, name, None)

    async def describe_broker_configs(
        self, broker_id: int, keys: list[str] | None = None
    ) -> dict[str, str]:
        """The settings ``broker_id`` runs with (all, or only ``keys``), asked of it."""
        conn = await self.broker(broker_id)
        return await self._describe_configs(conn, ConfigResource.BROKER, str(broker_id), keys)

    async def _describe_configs(
        self, conn: BrokerConnection, resource_type: int, name: str, keys: list[str] | None
    ) -> dict[str, str]:
        request = DescribeConfigsRequest(
            resources=[
                DescribeConfigsRequest.DescribeConfigsResource(
                    resource_type=resource_type, resource_name=name, configuration_keys=keys
                )
            ],
            include_synonyms=False,
            include_documentation=False,
        )
        (result,) = (await conn.send(request, 4)).results
        _raise_for(result.error_code, result.error_message or name)
        return {c.name: c.value for c in result.configs}

    async def alter_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        """Set the given topic settings, leaving the others as they are."""
        resource = IncrementalAlterConfigsRequest.AlterConfigsResource
        request = IncrementalAlterConfigsRequest(
            resources=[
                resource(
                    resource_type=ConfigResource.TOPIC,
                    resource_name=name,
                    configs=[
                        resource.AlterableConfig(name=k, config_operation=0, value=v)
                        for k, v in configs.items()
                    ],
                )
            ],
            validate_only=False,
        )
        (result,) = (await (await self._any()).send(request, 1)).responses
        _raise_for(result.error_code, result.error_message or name)

    async def list_offset(
        self,
        broker_id: int,
        topic: str,
        partition: int,
        timestamp: int,
        replica_id: int = CONSUMER_REPLICA_ID,
        isolation_level: int = 0,
    ) -> tuple[int, int]:
        """(offset, leader_epoch) that ``broker_id`` answers for ``timestamp``; latest
        is the last stable offset with ``isolation_level`` 1 (read_committed)."""
        request = list_offsets_request(
            {TopicPartition(topic, partition): timestamp}, lambda _: -1, isolation_level, replica_id
        )
        response = await (await self.broker(broker_id)).send(request, 7)
        answer: Any = response.topics[0].partitions[0]
        _raise_for(answer.error_code, f"{topic}-{partition} on broker {broker_id}")
        return answer.offset, answer.leader_epoch

    async def epoch_end_offset(
        self, broker_id: int, topic: str, partition: int, leader_epoch: int
    ) -> tuple[int, int]:
        """OffsetsForLeaderEpoch (KIP-320) to one broker: (the largest epoch it holds at
        or below ``leader_epoch``, that epoch's end offset). Asked of a new leader for the
        previous epoch, it is where replicas that held more diverged from it."""
        request = offsets_for_leader_epoch_request(
            {TopicPartition(topic, partition): (-1, leader_epoch)}
        )
        response = await (await self.broker(broker_id)).send(request, 4)
        answer: Any = response.topics[0].partitions[0]
        _raise_for(answer.error_code, f"{topic}-{partition} on broker {broker_id}")
        return answer.leader_epoch, answer.end_offset

    async def list_offsets(
        self, specs: Mapping[TopicPartition | tuple[str, int], int], isolation_level: int = 0
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """Per partition: EARLIEST (-2), LATEST (-1) or a timestamp in ms; each answer
        with its leader epoch (None: no record at or after that timestamp)."""
        return await list_offsets(
            self._cluster,
            {TopicPartition(*tp): spec for tp, spec in specs.items()},
            self.config["default.api.timeout.ms"] / 1000,
            (self.config["retry.backoff.ms"], self.config["retry.backoff.max.ms"]),
            isolation_level,
        )

    async def delete_records(
        self, before: Mapping[TopicPartition | tuple[str, int], int], timeout_ms: int = 30000
    ) -> dict[TopicPartition, int]:
        """DeleteRecords: each partition's log start moves to its offset (-1: the high
        watermark), asked of its leader; the new log start (low watermark) of each."""
        wanted = {TopicPartition(*tp): offset for tp, offset in before.items()}
        await self._cluster.wait_for_topics({tp.topic for tp in wanted}, self._timeout_s)
        by_leader: dict[int, dict[str, list[Any]]] = {}
        for tp, offset in sorted(wanted.items()):
            meta = self._cluster.cache.partition(tp)
            if meta is None:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, str(tp))
            topic_cls = DeleteRecordsRequest.DeleteRecordsTopic
            by_leader.setdefault(meta.leader, {}).setdefault(tp.topic, []).append(
                topic_cls.DeleteRecordsPartition(partition_index=tp.partition, offset=offset)
            )
        low: dict[TopicPartition, int] = {}
        for leader, topics in by_leader.items():
            request = DeleteRecordsRequest(
                topics=[
                    DeleteRecordsRequest.DeleteRecordsTopic(name=name, partitions=parts)
                    for name, parts in topics.items()
                ],
                timeout_ms=timeout_ms,
            )
            response = await self._cluster.send(leader, request, DELETE_RECORDS_VERSION)
            for t in response.topics:
                for p in t.partitions:
                    _raise_for(p.error_code, f"{t.name}-{p.partition_index} on broker {leader}")
                    low[TopicPartition(t.name, p.partition_index)] = p.low_watermark
        return low

    async def partitions(self, topics: Iterable[str]) -> list[TopicPartition]:
        """Every partition of these topics, from the metadata."""
        names = sorted(set(topics))
        await self._cluster.wait_for_topics(names, self._timeout_s)
        return [
            TopicPartition(t, p)
            for t in names
            for p in sorted(self._cluster.cache.topics[t].partitions)
        ]

    async def close(self) -> None:
        await self._close_groups()
        await self._cluster.close()
