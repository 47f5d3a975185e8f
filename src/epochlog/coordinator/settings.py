"""The coordinator's broker settings, under Kafka's names."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

# Kafka's defaults. offsets.topic.num.partitions stays 50 as in Kafka: a group's
# partition is abs(hash) % partitions, so the count must match Kafka's for the same
# group to land where a Kafka-written topic keeps it.
DEFAULTS: dict[str, str] = {
    "offsets.topic.num.partitions": "50",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.segment.bytes": "104857600",
    "offsets.retention.minutes": "10080",
    "offsets.retention.check.interval.ms": "600000",
    "offsets.commit.timeout.ms": "5000",
    "offsets.load.buffer.size": "5242880",
    "offset.metadata.max.bytes": "4096",
    "offsets.commit.reject.stale.leader.epoch": "false",
    "group.min.session.timeout.ms": "6000",
    "group.max.session.timeout.ms": "1800000",
    "group.initial.rebalance.delay.ms": "3000",
    "group.max.size": "2147483647",
}


@dataclass(frozen=True)
class CoordinatorSettings:
    num_partitions: int = 50
    replication_factor: int = 3
    segment_bytes: int = 104857600
    retention_ms: int = 10080 * 60_000
    retention_check_interval_ms: int = 600_000
    commit_timeout_ms: int = 5000
    load_buffer_size: int = 5242880
    max_metadata_bytes: int = 4096
    reject_stale_leader_epoch: bool = False
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    initial_rebalance_delay_ms: int = 3000
    max_group_size: int = 2147483647

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> CoordinatorSettings:
        def get(key: str) -> str:
            return str(props.get(key, DEFAULTS[key])).strip()

        def integer(key: str) -> int:
            try:
                return int(get(key))
            except ValueError:
                raise ValueError(f"{key}: expected an integer, got {get(key)!r}") from None

        stale = get("offsets.commit.reject.stale.leader.epoch").lower()
        if stale not in ("true", "false"):
            raise ValueError(f"offsets.commit.reject.stale.leader.epoch: {stale!r}")
        settings = cls(
            num_partitions=integer("offsets.topic.num.partitions"),
            replication_factor=integer("offsets.topic.replication.factor"),
            segment_bytes=integer("offsets.topic.segment.bytes"),
            retention_ms=integer("offsets.retention.minutes") * 60_000,
            retention_check_interval_ms=integer("offsets.retention.check.interval.ms"),
            commit_timeout_ms=integer("offsets.commit.timeout.ms"),
            load_buffer_size=integer("offsets.load.buffer.size"),
            max_metadata_bytes=integer("offset.metadata.max.bytes"),
            reject_stale_leader_epoch=stale == "true",
            min_session_timeout_ms=integer("group.min.session.timeout.ms"),
            max_session_timeout_ms=integer("group.max.session.timeout.ms"),
            initial_rebalance_delay_ms=integer("group.initial.rebalance.delay.ms"),
            max_group_size=integer("group.max.size"),
        )
        if settings.num_partitions <= 0 or settings.replication_factor <= 0:
            raise ValueError("offsets.topic.num.partitions and replication factor must be > 0")
        return settings
