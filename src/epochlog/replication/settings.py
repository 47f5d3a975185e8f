"""Broker settings of replication (declared in epochlog.settings.broker)."""

from __future__ import annotations

from dataclasses import dataclass

from epochlog.settings.broker import BROKER
from epochlog.settings.registry import SettingError, Settings, bind, bound


@dataclass(frozen=True)
class ReplicationSettings:
    replica_lag_time_max_ms: int = bound(BROKER, "replica.lag.time.max.ms")
    replica_fetch_wait_max_ms: int = bound(BROKER, "replica.fetch.wait.max.ms")
    replica_fetch_min_bytes: int = bound(BROKER, "replica.fetch.min.bytes")
    replica_fetch_max_bytes: int = bound(BROKER, "replica.fetch.max.bytes")
    replica_fetch_response_max_bytes: int = bound(BROKER, "replica.fetch.response.max.bytes")
    replica_fetch_backoff_ms: int = bound(BROKER, "replica.fetch.backoff.ms")
    replica_socket_timeout_ms: int = bound(BROKER, "replica.socket.timeout.ms")
    replica_selector_class: str = bound(BROKER, "replica.selector.class")

    def __post_init__(self) -> None:
        if self.replica_fetch_wait_max_ms > self.replica_socket_timeout_ms:
            raise SettingError(
                "replica.socket.timeout.ms", "must be at least replica.fetch.wait.max.ms"
            )

    @classmethod
    def from_settings(cls, settings: Settings) -> ReplicationSettings:
        return bind(cls, settings)
