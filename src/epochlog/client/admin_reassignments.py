"""Mixed into AsyncAdmin: partition reassignment as Kafka's Admin client offers it
(alterPartitionReassignments, listPartitionReassignments, KIP-455), sent to any broker:
every broker files a request for the controller and reads the same partition states."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kafka.protocol.admin import (
    AlterPartitionReassignmentsRequest,
    ListPartitionReassignmentsRequest,
)

from epochlog.client.errors import KafkaClientError, TopicPartition
from epochlog.protocol.errors import ErrorCode

ALTER_VERSION = 0
LIST_VERSION = 0
Topic = AlterPartitionReassignmentsRequest.ReassignableTopic


@dataclass(frozen=True)
class OngoingReassignment:
    replicas: list[int]
    adding_replicas: list[int]
    removing_replicas: list[int]


class ReassignmentAdmin:
    _any: Any

    async def alter_partition_reassignments(
        self, moves: Mapping[TopicPartition, list[int] | None], timeout_ms: int = 60000
    ) -> dict[TopicPartition, tuple[ErrorCode, str | None]]:
        """Start (a replica list) or cancel (None) each partition's reassignment; each
        partition's error and message as the broker answered."""
        by_topic: dict[str, list[Any]] = {}
        for tp, replicas in moves.items():
            by_topic.setdefault(tp.topic, []).append(
                Topic.ReassignablePartition(partition_index=tp.partition, replicas=replicas)
            )
        request = AlterPartitionReassignmentsRequest(
            timeout_ms=timeout_ms,
            topics=[Topic(name=name, partitions=parts) for name, parts in by_topic.items()],
        )
        response = await (await self._any()).send(request, ALTER_VERSION)
        if response.error_code:
            raise KafkaClientError(ErrorCode(response.error_code), response.error_message or "")
        return {
            TopicPartition(t.name, p.partition_index): (ErrorCode(p.error_code), p.error_message)
            for t in response.responses
            for p in t.partitions
        }

    async def list_partition_reassignments(self) -> dict[TopicPartition, OngoingReassignment]:
        """Every reassignment in progress."""
        request = ListPartitionReassignmentsRequest(timeout_ms=30000, topics=None)
        response = await (await self._any()).send(request, LIST_VERSION)
        if response.error_code:
            raise KafkaClientError(ErrorCode(response.error_code), response.error_message or "")
        return {
            TopicPartition(t.name, p.partition_index): OngoingReassignment(
                list(p.replicas), list(p.adding_replicas), list(p.removing_replicas)
            )
            for t in response.topics
            for p in t.partitions
        }
