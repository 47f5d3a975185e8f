"""epochlog's own Kafka client: asyncio core (``AsyncProducer``, ``AsyncConsumer``,
``AsyncAdmin``) and synchronous wrappers (``Producer``, ``Consumer``, ``Admin``)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from epochlog.client.admin import AsyncAdmin
    from epochlog.client.admin_groups import GroupDescription, GroupListing, MemberDescription
    from epochlog.client.consumer import (
        AsyncConsumer,
        ConsumerRecord,
        ConsumerRecords,
        OffsetAndEpoch,
    )
    from epochlog.client.errors import (
        ConfigError,
        DeliveryError,
        LogTruncationError,
        NoOffsetForPartitionError,
        OffsetOutOfRangeError,
        StaleMetadataError,
        TopicIdChangedError,
        TopicPartition,
    )
    from epochlog.client.group_commits import CommitFailedError
    from epochlog.client.lookup import OffsetAndTimestamp
    from epochlog.client.producer import AsyncProducer, RecordMetadata, RecordTooLargeError
    from epochlog.client.sync import Admin, Consumer, Producer
    from epochlog.client.transactions import GroupMetadata, PreparedTransaction, TransactionError

# Exports load on first use (PEP 562): a process that needs only the errors or the
# config (Spark's planner processes) does not pay for pyarrow, numpy and kafka-python.
_HOMES = {
    "AsyncAdmin": "admin",
    "GroupDescription": "admin_groups",
    "GroupListing": "admin_groups",
    "MemberDescription": "admin_groups",
    "AsyncConsumer": "consumer",
    "ConsumerRecord": "consumer",
    "ConsumerRecords": "consumer",
    "OffsetAndEpoch": "consumer",
    "ConfigError": "errors",
    "DeliveryError": "errors",
    "LogTruncationError": "errors",
    "NoOffsetForPartitionError": "errors",
    "OffsetOutOfRangeError": "errors",
    "StaleMetadataError": "errors",
    "TopicIdChangedError": "errors",
    "TopicPartition": "errors",
    "CommitFailedError": "group_commits",
    "OffsetAndTimestamp": "lookup",
    "AsyncProducer": "producer",
    "RecordMetadata": "producer",
    "RecordTooLargeError": "producer",
    "Admin": "sync",
    "Consumer": "sync",
    "Producer": "sync",
    "GroupMetadata": "transactions",
    "PreparedTransaction": "transactions",
    "TransactionError": "transactions",
}


def __getattr__(name: str) -> Any:
    """Import an export's module when the export is first asked for."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


__all__ = [
    "Admin",
    "AsyncAdmin",
    "AsyncConsumer",
    "AsyncProducer",
    "CommitFailedError",
    "ConfigError",
    "Consumer",
    "ConsumerRecord",
    "ConsumerRecords",
    "DeliveryError",
    "GroupDescription",
    "GroupListing",
    "GroupMetadata",
    "LogTruncationError",
    "MemberDescription",
    "NoOffsetForPartitionError",
    "OffsetAndEpoch",
    "OffsetAndTimestamp",
    "OffsetOutOfRangeError",
    "PreparedTransaction",
    "Producer",
    "RecordMetadata",
    "RecordTooLargeError",
    "StaleMetadataError",
    "TopicIdChangedError",
    "TopicPartition",
    "TransactionError",
]
