"""Errors the client raises to applications, and the partition key they name."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import NamedTuple

from epochlog.protocol.errors import ErrorCode
from epochlog.settings.registry import SettingError


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


# A setting refused at construction; the message starts with the setting's name.
ConfigError = SettingError


class ClientError(Exception):
    """Base of the errors the client hands to applications."""


class KafkaClientError(ClientError):
    """A broker answered with an error code the client does not handle by itself."""

    def __init__(self, code: ErrorCode, what: str) -> None:
        super().__init__(f"{code.name}: {what}")
        self.code = code


class NoOffsetForPartitionError(ClientError):
    """A partition has no position and ``auto.offset.reset`` is ``none``."""

    def __init__(self, partitions: list[TopicPartition]) -> None:
        names = ", ".join(str(tp) for tp in partitions)
        super().__init__(f"no position and auto.offset.reset=none for {names}")
        self.partitions = partitions


class OffsetOutOfRangeError(ClientError):
    """Positions outside the log, with ``auto.offset.reset=none``: tp -> position."""

    def __init__(self, offsets: Mapping[TopicPartition, int], message: str | None = None) -> None:
        if message is None:
            message = "offsets out of range: " + ", ".join(
                f"{tp} at {offset}" for tp, offset in offsets.items()
            )
        super().__init__(message)
        self.offsets = dict(offsets)


class LogTruncationError(OffsetOutOfRangeError):
    """The log was truncated below what the consumer read (KIP-320).

    ``divergence`` maps each partition to the first offset known to differ from what
    was read, or None when the consumer could not find it. ``offsets`` holds the
    positions the consumer had. The application may ``seek`` and go on.
    """

    def __init__(
        self,
        divergence: Mapping[TopicPartition, int | None],
        positions: Mapping[TopicPartition, int],
    ) -> None:
        parts = []
        for tp, offset in divergence.items():
            where = "unknown" if offset is None else str(offset)
            parts.append(f"{tp} (position {positions.get(tp)}, divergence offset {where})")
        super().__init__(positions, "log truncation detected: " + "; ".join(parts))
        self.divergence = dict(divergence)


class TopicIdChangedError(ClientError):
    """A topic in use was deleted and re-created (its topic ID changed, KIP-232):
    reading on would read the new topic from the old topic's offsets."""

    def __init__(
        self,
        topic: str,
        old_id: uuid.UUID,
        new_id: uuid.UUID,
        partitions: list[TopicPartition],
    ) -> None:
        names = ", ".join(str(tp) for tp in sorted(partitions))
        super().__init__(
            f"topic {topic} was re-created (topic id {old_id} is now {new_id}); "
            f"partitions in use: {names}"
        )
        self.topic = topic
        self.old_id = old_id
        self.new_id = new_id
        self.partitions = partitions


class StaleMetadataError(ClientError):
    """Every metadata answer within the retries was older than what the client holds."""


class DeliveryError(ClientError):
    """A produced record could not be delivered."""

    def __init__(self, tp: TopicPartition, reason: str, code: ErrorCode | None = None) -> None:
        super().__init__(f"{tp}: {reason}")
        self.partition = tp
        self.code = code
