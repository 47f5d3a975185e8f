"""epochlog's own Kafka client: asyncio core (``AsyncProducer``, ``AsyncConsumer``,
``AsyncAdmin``) and synchronous wrappers (``Producer``, ``Consumer``, ``Admin``)."""

from epochlog.client.admin import AsyncAdmin
from epochlog.client.admin_groups import GroupDescription, GroupListing, MemberDescription
from epochlog.client.consumer import AsyncConsumer, ConsumerRecord, ConsumerRecords, OffsetAndEpoch
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
    "LogTruncationError",
    "MemberDescription",
    "NoOffsetForPartitionError",
    "OffsetAndEpoch",
    "OffsetAndTimestamp",
    "OffsetOutOfRangeError",
    "Producer",
    "RecordMetadata",
    "RecordTooLargeError",
    "StaleMetadataError",
    "TopicIdChangedError",
    "TopicPartition",
]
