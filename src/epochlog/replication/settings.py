"""Broker settings of replication, under Kafka's names and with Kafka's defaults."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields


@dataclass(frozen=True)
class ReplicationSettings:
    replica_lag_time_max_ms: int = 30_000
    replica_fetch_wait_max_ms: int = 500
    replica_fetch_min_bytes: int = 1
    replica_fetch_max_bytes: int = 1_048_576
    replica_fetch_response_max_bytes: int = 10_485_760
    replica_fetch_backoff_ms: int = 1_000
    replica_socket_timeout_ms: int = 30_000

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> ReplicationSettings:
        """Read the ``replica.*`` settings present in ``props``; a bad value raises
        ValueError naming the setting, so a broker refuses to start with it."""
        values: dict[str, int] = {}
        for f in fields(cls):
            name = f.name.replace("_", ".")
            if name not in props:
                continue
            raw = props[name]
            try:
                value = int(str(raw))
            except ValueError:
                raise ValueError(f"{name}: expected an integer, got {raw!r}") from None
            if value < (1 if name != "replica.fetch.wait.max.ms" else 0):
                raise ValueError(f"{name}: must be positive, got {value}")
            values[f.name] = value
        settings = cls(**values)
        if settings.replica_fetch_wait_max_ms > settings.replica_socket_timeout_ms:
            raise ValueError("replica.socket.timeout.ms must be at least replica.fetch.wait.max.ms")
        return settings
