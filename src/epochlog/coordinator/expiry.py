"""KIP-211: when a group's committed offsets expire (``offsets.retention.minutes``).

- A group with a protocol type (it used the coordinator) that is Empty: all its offsets
  expire together, the retention after the moment it became Empty. Never while it has
  members; a group that re-joins before then keeps them (it leaves Empty, and the next
  Empty starts the count again).
- A Stable consumer group: only offsets of topics none of its members subscribes to
  expire, counted from their commit time.
- A standalone group (commits only, no protocol type): each offset expires the
  retention after its commit.
- Anything else (rebalancing, or a non-consumer protocol with members): nothing.

Retention times sent by OffsetCommit v2-v4 and expire timestamps in old records are
ignored: the broker's retention rules alone decide.
"""

from __future__ import annotations

from epochlog.coordinator.group import CONSUMER_PROTOCOL, Group, GroupState


def expired_offsets(group: Group, now_ms: int, retention_ms: int) -> list[tuple[str, int]]:
    """The (topic, partition) keys of ``group`` whose committed offset has expired."""
    if group.protocol_type is not None and group.is_(GroupState.EMPTY):
        base = group.state_timestamp_ms
        return [
            key
            for key, committed in group.offsets.items()
            if now_ms - (base if base >= 0 else committed.commit_timestamp) >= retention_ms
        ]
    if (
        group.protocol_type == CONSUMER_PROTOCOL
        and group.is_(GroupState.STABLE)
        and group.subscribed_topics is not None
    ):
        subscribed = group.subscribed_topics
        return [
            key
            for key, committed in group.offsets.items()
            if key[0] not in subscribed and now_ms - committed.commit_timestamp >= retention_ms
        ]
    if group.protocol_type is None:
        return [
            key
            for key, committed in group.offsets.items()
            if now_ms - committed.commit_timestamp >= retention_ms
        ]
    return []


def goes_dead(group: Group) -> bool:
    """After expiry, an Empty group with no offsets left is gone (tombstoned, Dead)."""
    return group.is_(GroupState.EMPTY) and not group.offsets and not group.members
