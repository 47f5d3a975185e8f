"""One partition as this broker sees it: its log, who leads it, in which epoch."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from epochlog.protocol.errors import ErrorCode, KafkaError
from epochlog.replication.fencing import check_current_leader_epoch

if TYPE_CHECKING:
    from epochlog.storage.log import Log


@dataclass
class PartitionState:
    """What the controller decided for a partition."""

    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    offline_replicas: list[int] = field(default_factory=list)
    # Set when the leader came from outside the ISR: its log may lack acknowledged data.
    elected_uncleanly: bool = False


class Partition:
    def __init__(
        self,
        topic: str,
        index: int,
        topic_id: uuid.UUID,
        log: Log,
        state: PartitionState,
        local_broker_id: int,
    ) -> None:
        self.topic = topic
        self.index = index
        self.topic_id = topic_id
        self.log = log
        self.state = state
        self.local_broker_id = local_broker_id
        self.high_watermark = log.log_end_offset if self.is_leader else 0
        # Offset at which the current leader epoch began on this replica (KIP-207).
        self.leader_epoch_start_offset = log.log_end_offset

    @property
    def is_leader(self) -> bool:
        return self.state.leader == self.local_broker_id

    @property
    def leader_epoch(self) -> int:
        return self.state.leader_epoch

    @property
    def elected_uncleanly(self) -> bool:
        return self.state.elected_uncleanly

    def become_leader(self, state: PartitionState) -> None:
        self.state = state
        self.leader_epoch_start_offset = self.log.log_end_offset
        self.log.maybe_assign_epoch_start_offset(state.leader_epoch, self.log.log_end_offset)
        self._advance_high_watermark()

    def check_leader(self, current_leader_epoch: int, require_leader: bool = True) -> None:
        """Raise the error a request for this partition must get, if any."""
        error = check_current_leader_epoch(current_leader_epoch, self.leader_epoch)
        if error != ErrorCode.NONE:
            raise KafkaError(error, f"{self.topic}-{self.index} is at epoch {self.leader_epoch}")
        if require_leader and not self.is_leader:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{self.topic}-{self.index}")

    def append_as_leader(self, records: bytearray) -> object:
        result = self.log.append_as_leader(records, self.leader_epoch)
        self._advance_high_watermark()
        return result

    def _advance_high_watermark(self) -> None:
        # With this broker the only replica in the ISR, everything appended is committed.
        if self.state.isr == [self.local_broker_id]:
            self.high_watermark = max(self.high_watermark, self.log.log_end_offset)

    def last_stable_offset(self) -> int:
        return self.high_watermark
