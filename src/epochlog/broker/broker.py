"""A broker: wires storage, partitions, the controller and the network together."""

from __future__ import annotations

import asyncio
import logging
import uuid

from epochlog.broker.config import BrokerConfig
from epochlog.broker.handlers import HANDLERS
from epochlog.broker.metadata_cache import BrokerEndpoint, MetadataCache, TopicMetadata
from epochlog.broker.server import ConnectionLoop, RequestChannel
from epochlog.controller.standalone import StandaloneController
from epochlog.protocol.errors import ErrorCode, KafkaError
from epochlog.replication.replica_manager import ReplicaManager
from epochlog.seams import Seams, Server
from epochlog.storage.config import LogConfig, topic_defaults_from_broker
from epochlog.storage.log_manager import LogManager, LogManagerSettings

log = logging.getLogger("epochlog.broker")


class Broker:
    def __init__(self, config: BrokerConfig, seams: Seams) -> None:
        self.config = config
        self.seams = seams
        self.broker_id = config.broker_id
        self.log_defaults = topic_defaults_from_broker(config.props)
        self.log_manager = LogManager(
            seams.disk,
            seams.clock,
            config.log_dirs,
            self.log_defaults,
            LogManagerSettings.from_properties(config.props),
        )
        self.metadata_cache = MetadataCache(str(config.get("cluster.id")))
        self.replica_manager = ReplicaManager(self.broker_id, self.log_manager)
        self.controller = StandaloneController(
            seams.disk, config.log_dirs[0], self.broker_id, self._new_uuid, self._on_topic_change
        )
        self._server: Server | None = None
        self.request_channel = RequestChannel(HANDLERS, self)
        self._connections = ConnectionLoop(
            self.request_channel,
            max_request_bytes=config.get_int("socket.request.max.bytes"),
            idle_timeout_s=config.get_int("connections.max.idle.ms") / 1000,
        )
        self._stop = asyncio.Event()
        self._background: asyncio.Task[None] | None = None

    @property
    def port(self) -> int:
        assert self._server is not None, "broker not started"
        return self._server.port

    def _new_uuid(self) -> uuid.UUID:
        return uuid.UUID(int=self.seams.random.getrandbits(128), version=4)

    def _on_topic_change(self, topic: TopicMetadata | None, name: str) -> None:
        if topic is None:
            self.metadata_cache.remove_topic(name)
            self.replica_manager.remove_topic(name)
        else:
            self.metadata_cache.update_topic(topic)
            self.replica_manager.apply_topic(topic, self.topic_log_config(topic.configs))

    def topic_log_config(self, configs: dict[str, str]) -> LogConfig:
        return self.log_defaults.with_overrides(configs)

    def _topic_config_by_name(self, name: str) -> LogConfig:
        topic = self.controller.topics.get(name)
        return self.topic_log_config(topic.configs) if topic else self.log_defaults

    async def start(self) -> None:
        self.controller.load_state()
        self.log_manager.start(self._topic_config_by_name)
        self.controller.publish_all()
        listener = self.config.listener
        self._server = await self.seams.network.serve(
            listener.host, listener.port, self._connections.serve
        )
        advertised = self.config.advertised_listener
        self.metadata_cache.brokers = {
            self.broker_id: BrokerEndpoint(
                self.broker_id,
                advertised.host,
                advertised.port or self._server.port,
                self.config.rack,
            )
        }
        self.metadata_cache.controller_id = self.broker_id
        self._background = asyncio.create_task(self.log_manager.run_background(self._stop))
        log.info(
            "broker %d serving on %s:%d with log.dirs=%s",
            self.broker_id,
            listener.host,
            self._server.port,
            ",".join(self.config.log_dirs),
        )

    async def stop(self) -> None:
        """Stop accepting, close connections, flush and checkpoint every log."""
        self._stop.set()
        if self._server is not None:
            self._server.close()
        for conn in list(self._connections.open_connections):
            conn.close()
        if self._background is not None:
            await self._background
        self.log_manager.close()
        log.info("broker %d stopped cleanly", self.broker_id)

    # Decisions shared by several request handlers.

    def auto_create_topic(self, name: str, allowed: bool) -> tuple[TopicMetadata | None, ErrorCode]:
        if not (allowed and self.config.get_bool("auto.create.topics.enable")):
            return None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        try:
            topic = self.controller.create_topic(
                name,
                self.config.get_int("num.partitions"),
                self.config.get_int("default.replication.factor"),
                {},
            )
        except KafkaError as exc:
            return None, exc.code
        return topic, ErrorCode.NONE

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
