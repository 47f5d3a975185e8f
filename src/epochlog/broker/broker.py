"""A broker: wires storage, partitions, the metastore, the controller and the network."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import os
import uuid

from prometheus_client import CollectorRegistry

from epochlog.broker.cluster_link import ClusterLink
from epochlog.broker.config import BrokerConfig
from epochlog.broker.dynamic_configs import DynamicBrokerConfigs
from epochlog.broker.fetch_sessions import FetchSessionCache
from epochlog.broker.handlers import HANDLERS
from epochlog.broker.metadata_cache import MetadataCache
from epochlog.broker.metrics import BrokerCollector
from epochlog.broker.server import ConnectionLoop, RequestChannel
from epochlog.controller.controller import Controller, ControllerSettings
from epochlog.coordinator.coordinator import GroupCoordinator
from epochlog.coordinator.hashing import OFFSETS_TOPIC
from epochlog.coordinator.settings import CoordinatorSettings
from epochlog.metadata.model import BrokerEndpoint, PartitionState, TopicMetadata, topic_name_error
from epochlog.metastore import Metastore, configured_uri, open_metastore
from epochlog.metrics.endpoint import MetricsEndpoint
from epochlog.metrics.requests import RequestMetrics
from epochlog.protocol.errors import ErrorCode, KafkaError
from epochlog.quotas.accounting import QuotaManagers, QuotaSettings
from epochlog.quotas.store import QuotaStore
from epochlog.replication.replica_manager import ReplicaManager
from epochlog.replication.settings import ReplicationSettings
from epochlog.seams import Seams, Server, Tls, TlsClientNetwork
from epochlog.seams.tasks import in_steps
from epochlog.security.acl_store import AclStore
from epochlog.security.authorizer import Authorizer
from epochlog.security.principal import ANONYMOUS
from epochlog.security.sasl_client import SaslClientNetwork
from epochlog.security.sasl_listeners import inter_broker_credentials, sasl_servers
from epochlog.security.scram_credentials import ScramUsers
from epochlog.security.tls import inter_broker_tls, listener_tls
from epochlog.settings.registry import Settings
from epochlog.storage.config import LogConfig, topic_defaults_from_broker
from epochlog.storage.log_manager import LogManager, LogManagerSettings
from epochlog.txn.coordinator import TransactionCoordinator
from epochlog.txn.markers import TOPIC_GONE
from epochlog.txn.partitioning import TRANSACTION_STATE_TOPIC, partition_for
from epochlog.txn.settings import TransactionSettings
from epochlog.txn.verification import TransactionVerifier

log = logging.getLogger("epochlog.broker")


def metastore_uri(config: BrokerConfig) -> str:
    return configured_uri(
        config["metastore"], config["zookeeper.connect"], os.path.abspath(config.log_dirs[0])
    )


class Broker:
    def __init__(self, config: BrokerConfig, seams: Seams) -> None:
        self.config = config
        self.seams = seams
        self.broker_id = config.broker_id
        # Every SSL listener's key material, read and checked before anything starts.
        self._listener_tls: dict[str, Tls] = {
            listener.name: listener_tls(
                listener.name,
                config.settings,
                config.listener_overrides.get(listener.name, {}),
                seams.disk,
            )
            for listener in config.listeners.served
            if listener.is_tls
        }
        # Every SASL listener's mechanisms and users; SCRAM users come from the
        # metastore once it is open.
        self.scram_users = ScramUsers()
        self._sasl = sasl_servers(
            config.listeners,
            config.listener_setting,
            config.listener_overrides,
            config.settings,
            self.scram_users.lookup,
        )
        # What replica fetchers and transaction markers connect with: the other
        # brokers' inter-broker listener, over TLS when that listener is SSL or
        # SASL_SSL, authenticated when it is SASL.
        peer_network = seams.network
        inter_broker = config.listeners.inter_broker
        if inter_broker in self._listener_tls:
            algorithm, _ = config.listener_setting(
                inter_broker, "ssl.endpoint.identification.algorithm"
            )
            client_tls = inter_broker_tls(self._listener_tls[inter_broker], algorithm == "https")
            peer_network = TlsClientNetwork(peer_network, client_tls)
        credentials = inter_broker_credentials(
            config.listeners, self._sasl, config.listener_overrides, config.settings
        )
        if credentials is not None:
            peer_network = SaslClientNetwork(peer_network, credentials, seams.clock)
        peer_seams = dataclasses.replace(seams, network=peer_network)
        # The settings in force: the file's, with the dynamic ones over them once the
        # metastore is open.
        self.dynamic_configs = DynamicBrokerConfigs(
            self.broker_id, config.settings, self._reconfigure
        )
        self.log_defaults = topic_defaults_from_broker(config.settings)
        self.log_manager = LogManager(
            seams.disk,
            seams.clock,
            config.log_dirs,
            self.log_defaults,
            LogManagerSettings.from_settings(config.settings),
        )
        self.log_manager.high_watermark = self._high_watermark
        self.metadata_cache = MetadataCache("")
        self.replica_manager = ReplicaManager(
            self.broker_id,
            self.log_manager,
            peer_seams,
            ReplicationSettings.from_settings(config.settings),
            self._endpoint_of,
            self._propose_isr,
        )
        self.fetch_sessions = FetchSessionCache(
            config["max.incremental.fetch.session.cache.slots"], seams.clock, seams.random
        )
        self.coordinator = GroupCoordinator(
            self.replica_manager, seams, CoordinatorSettings.from_settings(config.settings)
        )
        txn_settings = TransactionSettings.from_settings(config.settings)
        self.txn_coordinator = TransactionCoordinator(
            self.replica_manager,
            peer_seams,
            txn_settings,
            self._allocate_producer_id,
            self._partition_leader,
        )
        self.txn_verifier = TransactionVerifier(
            peer_network,
            seams.clock,
            self._transaction_coordinator,
            txn_settings.partition_verification,
            txn_settings.request_timeout_ms,
        )
        self.authorizer = (
            Authorizer(config.super_users, config["allow.everyone.if.no.acl.found"])
            if config.authorizer_enabled
            else None
        )
        self.acl_store: AclStore | None = None
        # Client quotas: every broker follows them from the metastore once it is open.
        self.quotas = QuotaManagers(QuotaSettings.from_settings(config.settings), seams.clock)
        self.quota_store: QuotaStore | None = None
        if self.authorizer is not None and not self._brokers_identified():
            log.warning(
                "ACLs are on but the inter-broker listener %s identifies no broker (it is "
                "PLAINTEXT or ssl.client.auth=none): brokers act as %s there, which needs "
                "super.users or ClusterAction on the cluster for replication, "
                "transaction markers and transactions' verification",
                config.listeners.inter_broker,
                ANONYMOUS,
            )
        self.endpoint: BrokerEndpoint | None = None
        self.store: Metastore | None = None
        self.cluster: ClusterLink | None = None
        self.controller: Controller | None = None
        self._servers: dict[str, Server] = {}
        # Each broker has a registry of its own: several run in one process in tests
        # and in the simulator.
        self.metrics_registry = CollectorRegistry()
        self.request_channel = RequestChannel(
            HANDLERS, self, seams.clock, RequestMetrics(self.metrics_registry), self.quotas
        )
        self._joined = asyncio.Event()
        self._connections = ConnectionLoop(
            self.request_channel,
            seams.clock,
            max_request_bytes=config["socket.request.max.bytes"],
            idle_timeout_s=config["connections.max.idle.ms"] / 1000,
            stall_timeout_s=config["request.stall.timeout.ms"] / 1000,
            ready=self._joined,
            queued_max_request_bytes=config["queued.max.request.bytes"],
        )
        self.metrics_registry.register(
            BrokerCollector(
                self.replica_manager,
                self.coordinator,
                self.metadata_cache,
                lambda: self.cluster,
                lambda: self.controller,
                lambda: len(self._connections.open_connections),
            )
        )
        self.metrics_endpoint = MetricsEndpoint(self.metrics_registry, seams.network, seams.clock)
        self.metrics_port: int | None = None
        self._stop = asyncio.Event()
        self._background: asyncio.Task[None] | None = None

    def _brokers_identified(self) -> bool:
        """Whether brokers reach each other as a principal of their own (SASL's user,
        or their certificate's), or the anonymous one they would have is a super user."""
        inter = self.config.listeners.inter_broker
        served = {listener.name: listener for listener in self.config.listeners.served}
        if inter in served and served[inter].is_sasl:
            return True
        client_auth, _ = self.config.listener_setting(inter, "ssl.client.auth")
        if inter in self._listener_tls and client_auth != "none":
            return True
        return ANONYMOUS in self.config.super_users

    @property
    def port(self) -> int:
        """The first listener's port."""
        return self.ports[self.config.listeners.served[0].name]

    @property
    def ports(self) -> dict[str, int]:
        """Each listener's bound port (port 0 in ``listeners`` picks a free one)."""
        assert self._servers, "broker not started"
        return {name: server.port for name, server in self._servers.items()}

    def _new_uuid(self) -> uuid.UUID:
        return uuid.UUID(int=self.seams.random.getrandbits(128), version=4)

    def _high_watermark(self, topic: str, partition: int) -> int | None:
        """The log cleaner's bound: it never compacts what is not yet committed, nor
        anything from the first open transaction on (the last stable offset)."""
        try:
            return self.replica_manager.partition(topic, partition).last_stable_offset()
        except KafkaError:
            return None

    def _inter_broker_endpoint(self, broker_id: int) -> BrokerEndpoint | None:
        """Where another broker listens for brokers (its inter-broker listener)."""
        endpoint = self.metadata_cache.brokers.get(broker_id)
        return endpoint.on(self.config.listeners.inter_broker) if endpoint else None

    def _endpoint_of(self, broker_id: int) -> tuple[str, int] | None:
        endpoint = self._inter_broker_endpoint(broker_id)
        return (endpoint.host, endpoint.port) if endpoint else None

    async def _propose_isr(
        self, topic: str, partition: int, leader_epoch: int, partition_epoch: int, isr: list[int]
    ) -> PartitionState | None:
        assert self.cluster is not None
        return await self.cluster.propose_isr(topic, partition, leader_epoch, partition_epoch, isr)

    async def _allocate_producer_id(self) -> int:
        assert self.cluster is not None
        return await self.cluster.allocate_producer_id()

    def _partition_leader(self, topic: str, partition: int) -> tuple[int, str, int] | str | None:
        """Where a partition's leader listens (for transaction markers)."""
        known = self.metadata_cache.topic(topic)
        state = known.partitions.get(partition) if known is not None else None
        if state is None:
            return TOPIC_GONE
        endpoint = self._inter_broker_endpoint(state.leader)
        return (endpoint.node_id, endpoint.host, endpoint.port) if endpoint else None

    def _transaction_coordinator(self, transactional_id: str) -> tuple[int, str, int] | None:
        """Where a transactional id's coordinator listens for brokers: the leader of its
        ``__transaction_state`` partition (for KIP-890's verification)."""
        topic = self.metadata_cache.topic(TRANSACTION_STATE_TOPIC)
        if topic is None or not topic.partitions:
            return None
        state = topic.partitions.get(partition_for(transactional_id, len(topic.partitions)))
        endpoint = self._inter_broker_endpoint(state.leader) if state is not None else None
        return (endpoint.node_id, endpoint.host, endpoint.port) if endpoint else None

    def topic_log_config(self, configs: dict[str, str]) -> LogConfig:
        return self.log_defaults.with_overrides(configs)

    def _reconfigure(self, settings: Settings) -> None:
        """Dynamic broker settings changed: topic defaults, the log manager's settings,
        the controller's and transactions' verification follow them, without a restart."""
        self.log_defaults = topic_defaults_from_broker(settings)

        def topic_config(name: str) -> LogConfig:
            topic = self.metadata_cache.topic(name)
            return self.topic_log_config(topic.configs if topic else {})

        self.log_manager.reconfigure(
            self.log_defaults, LogManagerSettings.from_settings(settings), topic_config
        )
        if self.controller is not None:
            self.controller.reconfigure(ControllerSettings.from_settings(settings))
        self.txn_verifier.enabled = settings["transaction.partition.verification.enable"]

    async def _apply_topic(self, topic: TopicMetadata) -> None:
        config = self.topic_log_config(topic.configs)
        await in_steps(self.seams.clock, self.replica_manager.apply_topic_steps(topic, config))
        if topic.name == OFFSETS_TOPIC:
            known = self.metadata_cache.topic(OFFSETS_TOPIC)
            self.coordinator.on_leadership_change(len(known.partitions) if known else None)
        elif topic.name == TRANSACTION_STATE_TOPIC:
            known = self.metadata_cache.topic(TRANSACTION_STATE_TOPIC)
            self.txn_coordinator.on_leadership_change(len(known.partitions) if known else None)

    async def _remove_topic(self, name: str) -> None:
        await in_steps(self.seams.clock, self.replica_manager.remove_topic_steps(name))
        if name == OFFSETS_TOPIC:
            self.coordinator.on_leadership_change()
        elif name == TRANSACTION_STATE_TOPIC:
            self.txn_coordinator.on_leadership_change()
        else:
            self.coordinator.on_topic_deleted(name)

    async def start(self) -> None:
        """Open the metastore, recover logs, serve, join the cluster, contend for control."""
        for name in self.config.unknown:
            # Kafka's wording, so that a misspelt setting is found as in Kafka's log.
            log.warning("The configuration '%s' was supplied but isn't a known config.", name)
        if not self.config["metastore"] and not self.config["zookeeper.connect"]:
            # The default metastore lives in the first log dir; the log manager makes
            # the dirs (one it cannot use is offline, not fatal).
            self.seams.disk.makedirs(self.config.log_dirs[0])
        self.store = await open_metastore(
            metastore_uri(self.config),
            self.seams.clock,
            session_timeout_ms=self.config["zookeeper.session.timeout.ms"],
        )
        self.cluster = ClusterLink(
            self.store,
            self.broker_id,
            self.seams.clock,
            self.metadata_cache,
            self._apply_topic,
            self._remove_topic,
            self._new_uuid,
        )
        if self._sasl:
            await self.scram_users.follow(self.store)
        # Before any log is opened, so that every one opens with the defaults in force.
        await self.dynamic_configs.follow(self.store)
        stored = await self.cluster.load_topics()
        if self.authorizer is not None:
            # Every ACL is in force before the first request is served.
            self.acl_store = AclStore(self.store, self.authorizer)
            await self.acl_store.follow()
        # Every quota is in force before the first request is served.
        self.quota_store = QuotaStore(self.store, self.quotas.apply)
        await self.quota_store.follow()
        self.log_manager.start(
            lambda name: (
                self.topic_log_config(stored[name].configs) if name in stored else self.log_defaults
            )
        )
        # Kafka's isNew: a replica assigned before this start is never created empty.
        self.replica_manager.hosted_at_start = {
            (name, index)
            for name, topic in stored.items()
            for index, state in topic.partitions.items()
            if self.broker_id in state.replicas
        }
        listeners = self.config.listeners
        for listener in listeners.served:
            self._servers[listener.name] = await self.seams.network.serve(
                listener.host,
                listener.port,
                functools.partial(
                    self._connections.serve,
                    listener=listener,
                    mapper=self.config.principal_mappers[listener.name],
                    sasl=self._sasl.get(listener.name),
                ),
                self._listener_tls.get(listener.name),
            )
        metrics_listener = self.config.metrics_listener
        if metrics_listener is not None:
            self.metrics_port = await self.metrics_endpoint.start(
                metrics_listener.host, metrics_listener.port
            )
            log.info(
                "broker %d serves metrics on http://%s:%d/metrics",
                self.broker_id,
                metrics_listener.host,
                self.metrics_port,
            )
        advertised = tuple(
            (a.name, a.host, a.port or self._servers[a.name].port) for a in listeners.advertised
        )
        _, host, port = next(a for a in advertised if a[0] == listeners.inter_broker)
        endpoint = BrokerEndpoint(self.broker_id, host, port, self.config.rack, advertised)
        self.endpoint = endpoint
        await self.cluster.join(endpoint, self.store.session_timeout_ms / 1000)
        self.controller = Controller(
            self.store,
            self.broker_id,
            self.seams.clock,
            ControllerSettings.from_settings(self.dynamic_configs.settings),
        )
        await self.controller.start()
        if not await self.cluster.wait_until_taken_in(self.store.session_timeout_ms / 1000):
            log.warning("no controller has taken broker %d in yet", self.broker_id)
        await self.replica_manager.start()
        await self.coordinator.start()
        await self.txn_coordinator.start()
        self._joined.set()
        self._background = asyncio.create_task(self.log_manager.run_background(self._stop))
        log.info(
            "broker %d serving %s with log.dirs=%s",
            self.broker_id,
            ",".join(
                f"{listener.name}://{listener.host}:{self._servers[listener.name].port}"
                f" ({listener.security_protocol})"
                for listener in listeners.served
            ),
            ",".join(self.config.log_dirs),
        )

    async def stop(self) -> None:
        """Hand leadership away, stop serving, leave the cluster, flush and checkpoint."""
        if self.cluster is not None and self.config["controlled.shutdown.enable"]:
            retries = self.config["controlled.shutdown.max.retries"]
            backoff_ms = self.config["controlled.shutdown.retry.backoff.ms"]
            await self.cluster.controlled_shutdown(retries * backoff_ms / 1000)
        self._stop.set()
        await self.txn_coordinator.stop()
        await self.txn_verifier.close()
        await self.coordinator.stop()
        await self.replica_manager.stop()
        for server in self._servers.values():
            server.close()
        self.metrics_endpoint.close()
        for conn in list(self._connections.open_connections):
            conn.close()
        if self.controller is not None:
            await self.controller.stop()
        if self.cluster is not None:
            await self.cluster.leave()
        if self.acl_store is not None:
            self.acl_store.close()
        if self.quota_store is not None:
            self.quota_store.close()
        if self.store is not None:
            await self.store.close()
        if self._background is not None:
            await self._background
        self.log_manager.close()
        log.info("broker %d stopped cleanly", self.broker_id)

    # Decisions shared by several request handlers.

    async def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: dict[str, str],
        assignment: dict[int, list[int]] | None = None,
        validate_only: bool = False,
        timeout_s: float = 30.0,
    ) -> TopicMetadata | None:
        assert self.cluster is not None
        error = topic_name_error(name)
        if error:
            raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, error)
        if self.metadata_cache.topic(name) is not None:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
        self.validate_topic_configs(configs)
        if assignment is None:
            if num_partitions <= 0:
                raise KafkaError(ErrorCode.INVALID_PARTITIONS, "number of partitions must be > 0")
            if replication_factor <= 0:
                raise KafkaError(
                    ErrorCode.INVALID_REPLICATION_FACTOR, "replication factor must be > 0"
                )
            start = self.seams.random.randint(0, max(0, len(self.metadata_cache.brokers) - 1))
            assignment = self.cluster.assign(num_partitions, replication_factor, start)
        else:
            self.validate_assignments(assignment)
        if validate_only:
            return None
        return await self.cluster.create_topic(name, assignment, configs, timeout_s)

    async def auto_create_topic(
        self, name: str, allowed: bool
    ) -> tuple[TopicMetadata | None, ErrorCode]:
        if not (allowed and self.config["auto.create.topics.enable"]):
            return None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        replication = min(
            self.config["default.replication.factor"], len(self.metadata_cache.brokers)
        )
        try:
            await self.create_topic(name, self.config["num.partitions"], max(1, replication), {})
        except KafkaError as exc:
            if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                return None, exc.code
        topic = self.metadata_cache.topic(name)
        return topic, ErrorCode.NONE if topic else ErrorCode.LEADER_NOT_AVAILABLE

    def validate_topic_configs(self, configs: dict[str, str]) -> None:
        try:
            self.topic_log_config(configs)
        except ValueError as exc:
            raise KafkaError(ErrorCode.INVALID_CONFIG, str(exc)) from None

    def validate_assignments(self, assignments: dict[int, list[int]]) -> None:
        for index, replicas in assignments.items():
            unknown = [b for b in replicas if b not in self.metadata_cache.brokers]
            if not replicas or unknown or len(set(replicas)) != len(replicas):
                raise KafkaError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"partition {index}: replicas {replicas} must be distinct live brokers",
                )
