"""Per-topic log settings, with Kafka's names and defaults.

Each field is a topic setting of ``epochlog.settings.topic`` (declared there, with the
broker settings that give its server-wide default).
"""

from __future__ import annotations

import dataclasses
import functools
import zlib
from collections.abc import Mapping
from dataclasses import dataclass

from epochlog.settings.registry import Settings, bound
from epochlog.settings.topic import TOPIC, parse_topic_settings, server_defaults

DAY_MS = 24 * 60 * 60 * 1000

CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"


@dataclass(frozen=True)
class LogConfig:
    """One topic's log settings; immutable, replaced whole on a config change."""

    segment_bytes: int = bound(TOPIC, "segment.bytes")
    segment_ms: int = bound(TOPIC, "segment.ms")
    segment_jitter_ms: int = bound(TOPIC, "segment.jitter.ms")
    retention_ms: int = bound(TOPIC, "retention.ms")
    retention_bytes: int = bound(TOPIC, "retention.bytes")
    index_interval_bytes: int = bound(TOPIC, "index.interval.bytes")
    flush_messages: int = bound(TOPIC, "flush.messages")
    flush_ms: int = bound(TOPIC, "flush.ms")
    max_message_bytes: int = bound(TOPIC, "max.message.bytes")
    message_timestamp_type: str = bound(TOPIC, "message.timestamp.type")
    cleanup_policy: str = bound(TOPIC, "cleanup.policy")
    delete_retention_ms: int = bound(TOPIC, "delete.retention.ms")
    min_cleanable_dirty_ratio: float = bound(TOPIC, "min.cleanable.dirty.ratio")
    unclean_leader_election_enable: bool = bound(TOPIC, "unclean.leader.election.enable")
    min_insync_replicas: int = bound(TOPIC, "min.insync.replicas")
    compression_type: str = bound(TOPIC, "compression.type")
    message_timestamp_before_max_ms: int = bound(TOPIC, "message.timestamp.before.max.ms")
    message_timestamp_after_max_ms: int = bound(TOPIC, "message.timestamp.after.max.ms")
    message_timestamp_difference_max_ms: int = bound(TOPIC, "message.timestamp.difference.max.ms")
    segment_index_bytes: int = bound(TOPIC, "segment.index.bytes")
    min_compaction_lag_ms: int = bound(TOPIC, "min.compaction.lag.ms")
    max_compaction_lag_ms: int = bound(TOPIC, "max.compaction.lag.ms")
    compression_gzip_level: int = bound(TOPIC, "compression.gzip.level")
    compression_lz4_level: int = bound(TOPIC, "compression.lz4.level")
    compression_zstd_level: int = bound(TOPIC, "compression.zstd.level")
    # Accepted from Kafka with no effect here (settings.topic.NO_EFFECT): kept so that
    # DescribeConfigs reports what was set.
    file_delete_delay_ms: int = bound(TOPIC, "file.delete.delay.ms")
    follower_replication_throttled_replicas: tuple[str, ...] = bound(
        TOPIC, "follower.replication.throttled.replicas"
    )
    leader_replication_throttled_replicas: tuple[str, ...] = bound(
        TOPIC, "leader.replication.throttled.replicas"
    )
    local_retention_bytes: int = bound(TOPIC, "local.retention.bytes")
    local_retention_ms: int = bound(TOPIC, "local.retention.ms")
    message_downconversion_enable: bool = bound(TOPIC, "message.downconversion.enable")
    message_format_version: str = bound(TOPIC, "message.format.version")
    preallocate: bool = bound(TOPIC, "preallocate")
    remote_log_copy_disable: bool = bound(TOPIC, "remote.log.copy.disable")
    remote_log_delete_on_disable: bool = bound(TOPIC, "remote.log.delete.on.disable")
    remote_storage_enable: bool = bound(TOPIC, "remote.storage.enable")

    @classmethod
    def from_properties(
        cls, props: Mapping[str, str], defaults: LogConfig | None = None
    ) -> LogConfig:
        """Topic properties over ``defaults``; unknown names or bad values raise ValueError."""
        return (defaults or cls()).with_overrides(props)

    def with_overrides(self, props: Mapping[str, object]) -> LogConfig:
        """A copy with the given topic settings applied (unknown or bad ones refused)."""
        changes = {
            name.replace(".", "_"): value for name, value in parse_topic_settings(props).items()
        }
        return dataclasses.replace(self, **changes)

    def to_properties(self) -> dict[str, str]:
        """Kafka-named string form (DescribeConfigs, persisted topic config)."""
        return {s.name: s.kind.render(getattr(self, s.name.replace(".", "_"))) for s in TOPIC}

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == LOG_APPEND_TIME

    @property
    def roll_ms(self) -> int:
        """A segment's age that rolls it: segment.ms, or for a compacted topic the
        smaller max.compaction.lag.ms, so the cleaner can reach every record in time."""
        if self.compact:
            return min(self.segment_ms, self.max_compaction_lag_ms)
        return self.segment_ms

    def roll_after_ms(self, segment_key: str) -> int:
        """The age that rolls one segment: ``roll_ms`` less its jitter, fixed per segment
        by a hash of ``segment_key`` (Kafka draws it at random; a hash spreads rolls as
        well and replays the same in the simulator)."""
        jitter = min(self.segment_jitter_ms, self.roll_ms)
        if jitter <= 0:
            return self.roll_ms
        return self.roll_ms - zlib.crc32(segment_key.encode()) % jitter

    @property
    def timestamp_bounds(self) -> tuple[int, int]:
        """(before, after): how far a CreateTime timestamp may be behind or ahead of the
        broker's clock (the deprecated difference setting bounds both, as in Kafka 3)."""
        both = self.message_timestamp_difference_max_ms
        return (
            min(self.message_timestamp_before_max_ms, both),
            min(self.message_timestamp_after_max_ms, both),
        )

    @property
    def delete(self) -> bool:
        """Time and size retention apply only under ``delete`` (Kafka's rule)."""
        return "delete" in self.cleanup_policy.split(",")

    @functools.cached_property  # (read on every append; the instance is immutable)
    def compact(self) -> bool:
        """The log cleaner keeps the latest record per key; keys are then required."""
        return "compact" in self.cleanup_policy.split(",")


def topic_defaults_from_broker(broker: Settings) -> LogConfig:
    """The default LogConfig implied by a broker's ``log.*`` settings."""
    return LogConfig().with_overrides(server_defaults(broker))
