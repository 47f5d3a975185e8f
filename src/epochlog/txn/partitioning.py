"""Which ``__transaction_state`` partition holds a transactional id: Kafka's
``abs(hashCode(id)) % partitions``, the same function as for groups."""

from __future__ import annotations

from epochlog.coordinator.hashing import partition_for

TRANSACTION_STATE_TOPIC = "__transaction_state"

__all__ = ["TRANSACTION_STATE_TOPIC", "partition_for"]
