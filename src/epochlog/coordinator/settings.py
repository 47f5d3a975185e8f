"""The group coordinator's broker settings (declared in epochlog.settings.broker)."""

from __future__ import annotations

from dataclasses import dataclass

from epochlog.settings.broker import BROKER
from epochlog.settings.registry import Settings, bind, bound

MINUTE_MS = 60_000


@dataclass(frozen=True)
class CoordinatorSettings:
    num_partitions: int = bound(BROKER, "offsets.topic.num.partitions")
    replication_factor: int = bound(BROKER, "offsets.topic.replication.factor")
    segment_bytes: int = bound(BROKER, "offsets.topic.segment.bytes")
    retention_ms: int = bound(BROKER, "offsets.retention.minutes", scale=MINUTE_MS)
    retention_check_interval_ms: int = bound(BROKER, "offsets.retention.check.interval.ms")
    commit_timeout_ms: int = bound(BROKER, "offsets.commit.timeout.ms")
    load_buffer_size: int = bound(BROKER, "offsets.load.buffer.size")
    max_metadata_bytes: int = bound(BROKER, "offset.metadata.max.bytes")
    reject_stale_leader_epoch: bool = bound(BROKER, "offsets.commit.reject.stale.leader.epoch")
    min_session_timeout_ms: int = bound(BROKER, "group.min.session.timeout.ms")
    max_session_timeout_ms: int = bound(BROKER, "group.max.session.timeout.ms")
    initial_rebalance_delay_ms: int = bound(BROKER, "group.initial.rebalance.delay.ms")
    max_group_size: int = bound(BROKER, "group.max.size")

    @classmethod
    def from_settings(cls, settings: Settings) -> CoordinatorSettings:
        return bind(cls, settings)
