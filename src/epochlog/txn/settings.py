"""The transaction coordinator's broker settings, under Kafka's names and defaults."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

DEFAULTS: dict[str, str] = {
    "transaction.state.log.num.partitions": "50",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "transaction.state.log.segment.bytes": "104857600",
    "transaction.state.log.load.buffer.size": "5242880",
    "transaction.max.timeout.ms": "900000",
    "transactional.id.expiration.ms": "604800000",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "10000",
    "transaction.remove.expired.transaction.cleanup.interval.ms": "3600000",
    # How long the coordinator waits for a __transaction_state write or a marker to be
    # acknowledged (Kafka's TransactionConfig takes the broker's request timeout).
    "request.timeout.ms": "30000",
}


@dataclass(frozen=True)
class TransactionSettings:
    num_partitions: int = 50
    replication_factor: int = 3
    min_isr: int = 2
    segment_bytes: int = 104857600
    load_buffer_size: int = 5242880
    max_timeout_ms: int = 900_000
    id_expiration_ms: int = 604_800_000
    abort_interval_ms: int = 10_000
    expiration_interval_ms: int = 3_600_000
    request_timeout_ms: int = 30_000

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> TransactionSettings:
        def integer(key: str) -> int:
            raw = str(props.get(key, DEFAULTS[key])).strip()
            try:
                value = int(raw)
            except ValueError:
                raise ValueError(f"{key}: expected an integer, got {raw!r}") from None
            if value <= 0:
                raise ValueError(f"{key}: must be > 0, got {value}")
            return value

        return cls(
            num_partitions=integer("transaction.state.log.num.partitions"),
            replication_factor=integer("transaction.state.log.replication.factor"),
            min_isr=integer("transaction.state.log.min.isr"),
            segment_bytes=integer("transaction.state.log.segment.bytes"),
            load_buffer_size=integer("transaction.state.log.load.buffer.size"),
            max_timeout_ms=integer("transaction.max.timeout.ms"),
            id_expiration_ms=integer("transactional.id.expiration.ms"),
            abort_interval_ms=integer(
                "transaction.abort.timed.out.transaction.cleanup.interval.ms"
            ),
            expiration_interval_ms=integer(
                "transaction.remove.expired.transaction.cleanup.interval.ms"
            ),
            request_timeout_ms=integer("request.timeout.ms"),
        )
