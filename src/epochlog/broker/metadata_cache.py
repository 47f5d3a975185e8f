"""The cluster as this broker last learnt it: brokers, topics, partition leadership.

Metadata answers come from here; it may lag the controller (the KIP-232 situation).
"""

from __future__ import annotations

import uuid

from epochlog.metadata.model import BrokerEndpoint, TopicMetadata


class MetadataCache:
    def __init__(self, cluster_id: str) -> None:
        self.cluster_id = cluster_id
        self.controller_id = -1
        self.brokers: dict[int, BrokerEndpoint] = {}
        self._topics: dict[str, TopicMetadata] = {}
        self._topic_names_by_id: dict[uuid.UUID, str] = {}

    def update_topic(self, topic: TopicMetadata) -> None:
        self._topics[topic.name] = topic
        self._topic_names_by_id[topic.topic_id] = topic.name

    def remove_topic(self, name: str) -> None:
        topic = self._topics.pop(name, None)
        if topic is not None:
            self._topic_names_by_id.pop(topic.topic_id, None)

    def topic(self, name: str) -> TopicMetadata | None:
        return self._topics.get(name)

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return self._topic_names_by_id.get(topic_id)

    def topics(self) -> list[TopicMetadata]:
        return list(self._topics.values())
