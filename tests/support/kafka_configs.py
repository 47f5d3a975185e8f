"""Kafka's own list of topic-level configs, to hold epochlog's settings against."""

from __future__ import annotations

# Every topic-level config of Kafka 3.9 (TopicConfig.java, the documentation's
# topic-level configs), with Kafka's default as it writes it.
KAFKA_TOPIC_CONFIGS = {
    "cleanup.policy": "delete",
    "compression.gzip.level": "-1",
    "compression.lz4.level": "9",
    "compression.type": "producer",
    "compression.zstd.level": "3",
    "delete.retention.ms": "86400000",
    "file.delete.delay.ms": "60000",
    "flush.messages": "9223372036854775807",
    "flush.ms": "9223372036854775807",
    "follower.replication.throttled.replicas": "",
    "index.interval.bytes": "4096",
    "leader.replication.throttled.replicas": "",
    "local.retention.bytes": "-2",
    "local.retention.ms": "-2",
    "max.compaction.lag.ms": "9223372036854775807",
    "max.message.bytes": "1048588",
    "message.downconversion.enable": "true",
    "message.format.version": "3.0-IV1",
    "message.timestamp.after.max.ms": "9223372036854775807",
    "message.timestamp.before.max.ms": "9223372036854775807",
    "message.timestamp.difference.max.ms": "9223372036854775807",
    "message.timestamp.type": "CreateTime",
    "min.cleanable.dirty.ratio": "0.5",
    "min.compaction.lag.ms": "0",
    "min.insync.replicas": "1",
    "preallocate": "false",
    "remote.log.copy.disable": "false",
    "remote.log.delete.on.disable": "false",
    "remote.storage.enable": "false",
    "retention.bytes": "-1",
    "retention.ms": "604800000",
    "segment.bytes": "1073741824",
    "segment.index.bytes": "10485760",
    "segment.jitter.ms": "0",
    "segment.ms": "604800000",
    "unclean.leader.election.enable": "false",
}
