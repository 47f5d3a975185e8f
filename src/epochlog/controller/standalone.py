"""The controller of a one-broker cluster: topic lifecycle and producer-id blocks,
persisted in a small file in the first log directory.

It makes the same decisions a cluster controller makes (topic IDs, leader epochs,
producer ids that are never handed out twice) so that the broker code above it does not
change when the metastore-backed controller takes over.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections.abc import Callable

from epochlog.broker.metadata_cache import TopicMetadata, topic_name_error
from epochlog.protocol.errors import ErrorCode, KafkaError
from epochlog.replication.partition import PartitionState
from epochlog.seams import Disk

log = logging.getLogger("epochlog.controller")

STATE_FILE = "epochlog-cluster.json"
PRODUCER_ID_BLOCK = 1000


class StandaloneController:
    def __init__(
        self,
        disk: Disk,
        state_dir: str,
        broker_id: int,
        new_uuid: Callable[[], uuid.UUID],
        on_topic_change: Callable[[TopicMetadata | None, str], None],
    ) -> None:
        self._disk = disk
        self._path = os.path.join(state_dir, STATE_FILE)
        self.broker_id = broker_id
        self._new_uuid = new_uuid
        self._on_topic_change = on_topic_change
        self.topics: dict[str, TopicMetadata] = {}
        self._next_producer_id = 0
        self._producer_id_limit = 0

    def load_state(self) -> None:
        if not self._disk.exists(self._path):
            return
        data = json.loads(self._disk.read_file(self._path))
        self.topics = {t["name"]: TopicMetadata.from_json(t) for t in data.get("topics", [])}
        # A block handed out before a restart is never reused, even if partly unused.
        self._next_producer_id = self._producer_id_limit = data.get("producer_id_limit", 0)

    def publish_all(self) -> None:
        """Tell the broker about every topic, as after a restart."""
        for topic in self.topics.values():
            self._on_topic_change(topic, topic.name)

    def _persist(self) -> None:
        data = {
            "topics": [t.to_json() for t in self.topics.values()],
            "producer_id_limit": self._producer_id_limit,
        }
        self._disk.write_atomic(self._path, json.dumps(data, indent=1).encode())

    def validate_new_topic(
        self, name: str, num_partitions: int, replication_factor: int, live_brokers: int
    ) -> None:
        error = topic_name_error(name)
        if error:
            raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, error)
        if name in self.topics:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
        if num_partitions <= 0:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, "number of partitions must be > 0")
        if replication_factor <= 0:
            raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR, "replication factor must be > 0")
        if replication_factor > live_brokers:
            raise KafkaError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"replication factor {replication_factor} is larger than the"
                f" {live_brokers} available broker(s)",
            )

    def create_topic(
        self, name: str, num_partitions: int, replication_factor: int, configs: dict[str, str]
    ) -> TopicMetadata:
        self.validate_new_topic(name, num_partitions, replication_factor, live_brokers=1)
        topic = TopicMetadata(
            name=name,
            topic_id=self._new_uuid(),
            configs=dict(configs),
            partitions={i: self._new_partition_state() for i in range(num_partitions)},
        )
        self.topics[name] = topic
        self._persist()
        log.info("created topic %s id=%s partitions=%d", name, topic.topic_id, num_partitions)
        self._on_topic_change(topic, name)
        return topic

    def _new_partition_state(self) -> PartitionState:
        return PartitionState(
            leader=self.broker_id, leader_epoch=0, replicas=[self.broker_id], isr=[self.broker_id]
        )

    def delete_topic(self, name: str) -> TopicMetadata:
        topic = self.topics.pop(name, None)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {name!r}")
        self._persist()
        log.info("deleted topic %s id=%s", name, topic.topic_id)
        self._on_topic_change(None, name)
        return topic

    def create_partitions(self, name: str, count: int) -> TopicMetadata:
        topic = self.topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {name!r}")
        current = len(topic.partitions)
        if count <= current:
            raise KafkaError(
                ErrorCode.INVALID_PARTITIONS,
                f"topic {name!r} has {current} partitions; the new count must be larger",
            )
        for index in range(current, count):
            topic.partitions[index] = self._new_partition_state()
        self._persist()
        self._on_topic_change(topic, name)
        return topic

    def alter_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        topic = self.topics[name]
        topic.configs = dict(configs)
        self._persist()
        self._on_topic_change(topic, name)

    def allocate_producer_id(self) -> int:
        if self._next_producer_id >= self._producer_id_limit:
            self._producer_id_limit = self._next_producer_id + PRODUCER_ID_BLOCK
            self._persist()
        producer_id = self._next_producer_id
        self._next_producer_id += 1
        return producer_id
