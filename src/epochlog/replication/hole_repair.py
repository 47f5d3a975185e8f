"""A follower fills the holes of its log (``storage/log_holes.py``) from its leader.

The fetcher asks for exactly each hole's offsets with a consumer's Fetch (replica id
-1): the leader answers from below its high watermark and does not take the fetch
offset for this follower's log end, so neither the high watermark nor the ISR moves.
Followers copy the leader's bytes, so the batches must fill the hole exactly (same
offsets, same length); they are written in place (missing offsets: as a new segment).
When they cannot (another length, other offsets), the leader's log differs there: the
follower truncates to the hole's start, as after a divergence, and fetches the rest
again. A leader that cannot answer yet (it lacks the range too, leadership is moving,
the range went below its log start) leaves the hole for the next try.
"""

from __future__ import annotations

import logging
from typing import Any

from kafka.protocol.consumer import FetchRequest

from epochlog.protocol.errors import ErrorCode
from epochlog.replication.partition import Partition
from epochlog.storage.log_holes import Hole, RepairMismatch

log = logging.getLogger("epochlog.replication.fetcher")

REPAIR_VERSION = 12
CONSUMER_REPLICA_ID = -1
# What one answer may bring for missing offsets, whose size is not known.
MISSING_FETCH_BYTES = 1 << 20


def hole_to_repair(partition: Partition) -> Hole | None:
    """The first hole of the partition's log some replica may still fill."""
    waiting = partition.log.holes.awaiting_repair()
    return waiting[0] if waiting else None


def repair_request(wanted: list[tuple[Partition, int, Hole]], max_bytes: int) -> Any:
    """One Fetch (as a consumer, answered at once) of each hole's offsets, each in the
    leader epoch the follower knows."""
    by_topic: dict[str, list[Any]] = {}
    for partition, leader_epoch, hole in wanted:
        by_topic.setdefault(partition.topic, []).append(
            FetchRequest.FetchTopic.FetchPartition(
                partition=partition.index,
                current_leader_epoch=leader_epoch,
                fetch_offset=hole.first_offset,
                last_fetched_epoch=-1,
                log_start_offset=-1,
                partition_max_bytes=MISSING_FETCH_BYTES if hole.missing else hole.size,
            )
        )
    return FetchRequest(
        replica_id=CONSUMER_REPLICA_ID,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=max_bytes,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[FetchRequest.FetchTopic(topic=t, partitions=p) for t, p in by_topic.items()],
        forgotten_topics_data=[],
        rack_id="",
    )


def apply_repair(partition: Partition, hole: Hole, answer: Any, leader_id: int) -> bool:
    """Fill ``hole`` with the leader's answer, or truncate to the hole's start when the
    answer shows the leader's log differs there; an error that may pass waits for the
    next try. True if the log changed."""
    plog = partition.log
    if not any(h is hole for h in plog.holes):
        return False
    if ErrorCode(answer.error_code) != ErrorCode.NONE or not answer.records:
        return False
    path = hole.path
    try:
        if plog.fill_hole(hole, bytes(answer.records)):
            log.warning("%s: repaired a hole from leader %d", partition, leader_id)
        return True
    except RepairMismatch as exc:
        why = f"leader {leader_id}'s copy of offsets from {hole.first_offset} differs: {exc}"
    log.warning("%s: %s; truncating there (the damaged bytes are kept in %s)", partition, why, path)
    plog.truncate_to(hole.first_offset, why)
    partition.high_watermark = min(partition.high_watermark, plog.log_end_offset)
    return True
