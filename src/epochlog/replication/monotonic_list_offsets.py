"""KIP-207: offsets a client gets from ListOffsets never go backwards across a leader
change. A new leader's high watermark may still be below what the old leader already
exposed, so until it has caught up to the start of its own epoch it answers clients with
the retriable OFFSET_NOT_AVAILABLE."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from epochlog.replication.partition import Partition

CONSUMER_REPLICA_ID = -1


def offsets_available(partition: Partition, replica_id: int) -> bool:
    """Only consumers are held back: replicas and tools (the debugging replica id -2)
    read log ends, not what clients may see. After an unclean election the old leader's
    offsets are gone anyway, so waiting would only block clients for nothing."""
    if replica_id != CONSUMER_REPLICA_ID or partition.elected_uncleanly:
        return True
    return partition.high_watermark >= partition.leader_epoch_start_offset
