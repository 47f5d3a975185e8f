"""KIP-320 leader-epoch fencing: the check every Fetch, ListOffsets and
OffsetsForLeaderEpoch request passes before it touches a partition."""

from __future__ import annotations

from epochlog.protocol.errors import ErrorCode

NO_EPOCH = -1


def check_current_leader_epoch(requested: int, current: int) -> ErrorCode:
    """A requester on an older epoch is fenced; one on a newer epoch knows of a leader
    change this broker has not learnt yet; -1 (older clients) skips the check."""
    if requested in (NO_EPOCH, current):
        return ErrorCode.NONE
    if requested < current:
        return ErrorCode.FENCED_LEADER_EPOCH
    return ErrorCode.UNKNOWN_LEADER_EPOCH
