"""What epochlog's own clients count about themselves, as ``metrics()`` hands it out:
Kafka's client metric names where Kafka has one (``record-send-total``,
``records-consumed-total``), epochlog's own for what KIP-320 adds (truncations found,
positions reset by the policy)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ProducerCounts:
    records_sent: int = 0
    records_failed: int = 0

    def as_dict(self) -> dict[str, int]:
        return {"record-send-total": self.records_sent, "record-error-total": self.records_failed}


@dataclass
class ConsumerCounts:
    """One consumer's counts, shared by its partitions' positions (which find the
    truncations and make the resets)."""

    policy: str = "none"
    records_consumed: int = 0
    truncations_detected: int = 0
    offset_resets: int = 0

    def as_dict(self) -> dict[str, int]:
        return {
            "records-consumed-total": self.records_consumed,
            "truncations-detected-total": self.truncations_detected,
            # By auto.offset.reset: each automatic move of a position (to a divergence
            # offset, or a reset through ListOffsets).
            f"offset-resets-{self.policy}-total": self.offset_resets,
        }
