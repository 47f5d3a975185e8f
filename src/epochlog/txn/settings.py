"""The transaction coordinator's broker settings (declared in epochlog.settings.broker)."""

from __future__ import annotations

from dataclasses import dataclass

from epochlog.settings.broker import BROKER
from epochlog.settings.registry import Settings, bind, bound


@dataclass(frozen=True)
class TransactionSettings:
    num_partitions: int = bound(BROKER, "transaction.state.log.num.partitions")
    replication_factor: int = bound(BROKER, "transaction.state.log.replication.factor")
    min_isr: int = bound(BROKER, "transaction.state.log.min.isr")
    segment_bytes: int = bound(BROKER, "transaction.state.log.segment.bytes")
    load_buffer_size: int = bound(BROKER, "transaction.state.log.load.buffer.size")
    max_timeout_ms: int = bound(BROKER, "transaction.max.timeout.ms")
    id_expiration_ms: int = bound(BROKER, "transactional.id.expiration.ms")
    abort_interval_ms: int = bound(
        BROKER, "transaction.abort.timed.out.transaction.cleanup.interval.ms"
    )
    expiration_interval_ms: int = bound(
        BROKER, "transaction.remove.expired.transaction.cleanup.interval.ms"
    )
    partition_verification: bool = bound(BROKER, "transaction.partition.verification.enable")
    # How long a __transaction_state write or a marker may take to be acknowledged
    # (Kafka's TransactionConfig takes the broker's request timeout).
    request_timeout_ms: int = bound(BROKER, "request.timeout.ms")

    @classmethod
    def from_settings(cls, settings: Settings) -> TransactionSettings:
        return bind(cls, settings)
