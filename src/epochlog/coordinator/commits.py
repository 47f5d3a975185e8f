"""Whether an OffsetCommit may be stored: the group check (generation and member
fencing) and the per-partition checks (metadata size, KIP-232's stale leader epoch and
re-created topic). Pure decisions; the coordinator stores what passes."""

from __future__ import annotations

from dataclasses import dataclass

from epochlog.coordinator.group import CommittedOffset, Group, GroupState
from epochlog.protocol.errors import ErrorCode

NO_GENERATION = -1


@dataclass(frozen=True)
class CommitRequest:
    offset: int
    leader_epoch: int
    metadata: str | None
    # The partition's latest leader epoch as the broker knows it (-1: not known). A topic
    # starts at epoch 0 and its epochs only grow, so it bounds the epochs of this topic.
    partition_leader_epoch: int = -1


def group_commit_error(
    group: Group | None, generation_id: int, member_id: str, instance_id: str | None
) -> ErrorCode:
    """Kafka's order of checks for a commit to a group (GroupCoordinator's
    validateOffsetCommit, then the group state; NONE: the commit may proceed).

    No group: a commit without a generation is a standalone commit (the group is
    created for it); with one it is from a generation that no longer exists. A member
    and its generation are checked before the group's state, so a member of an older
    generation gets ILLEGAL_GENERATION even while the group rebalances (a cooperative
    consumer committing then must learn it lost its generation, not to wait).
    """
    if group is None:
        return ErrorCode.NONE if generation_id < 0 else ErrorCode.ILLEGAL_GENERATION
    if group.is_(GroupState.DEAD):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if generation_id >= 0 or member_id or instance_id is not None:
        if group.is_static_fenced(member_id, instance_id):
            return ErrorCode.FENCED_INSTANCE_ID
        if not group.has(member_id):
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
    elif not group.is_(GroupState.EMPTY):
        # Only members may commit to a group that has members.
        return ErrorCode.UNKNOWN_MEMBER_ID
    if group.is_(GroupState.COMPLETING_REBALANCE):
        # A member of this generation (from its JoinGroup answer) without an assignment yet.
        return ErrorCode.REBALANCE_IN_PROGRESS
    return ErrorCode.NONE


def txn_commit_error(
    group: Group | None, generation_id: int, member_id: str, instance_id: str | None
) -> ErrorCode:
    """TxnOffsetCommit's group check (Kafka's doTxnCommitOffsets): looser than
    OffsetCommit's, since a transactional producer may commit for a group it is not a
    member of (generation -1, no member id)."""
    if group is None:
        return ErrorCode.NONE if generation_id < 0 else ErrorCode.ILLEGAL_GENERATION
    if group.is_(GroupState.DEAD):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if group.is_static_fenced(member_id, instance_id):
        return ErrorCode.FENCED_INSTANCE_ID
    if member_id and not group.has(member_id):
        return ErrorCode.UNKNOWN_MEMBER_ID
    if generation_id >= 0 and generation_id != group.generation_id:
        return ErrorCode.ILLEGAL_GENERATION
    return ErrorCode.NONE


def is_from_earlier_topic(commit: CommitRequest) -> bool:
    """KIP-232's partition epoch, by way of leader epochs: a commit whose leader epoch is
    above every epoch the partition has had was read from an earlier topic of the same
    name, deleted and re-created since the consumer's metadata (OffsetCommit carries no
    topic ID before v10, so its epoch is the only witness). Unknown epochs (-1) pass."""
    return commit.leader_epoch > commit.partition_leader_epoch >= 0


def is_stale_epoch(current: CommittedOffset | None, commit: CommitRequest) -> bool:
    """KIP-232: a commit whose leader epoch is older than the committed one, at the same
    or a later offset, comes from a consumer that missed a leader change (a later
    position can only carry an equal or newer epoch). Unknown epochs (-1) pass, and so
    does an offset committed for an earlier topic of this name (its epoch is above the
    partition's): it fences nothing of the topic there now."""
    if current is None or commit.leader_epoch < 0 or current.leader_epoch < 0:
        return False
    if current.leader_epoch > commit.partition_leader_epoch >= 0:
        return False
    return commit.leader_epoch < current.leader_epoch and commit.offset >= current.offset


def partition_commit_error(
    current: CommittedOffset | None,
    commit: CommitRequest,
    max_metadata_bytes: int,
    reject_stale_epoch: bool,
) -> ErrorCode:
    """The error one partition of a commit gets before anything is written; KIP-232's
    checks in its order: the partition epoch (a re-created topic), then the leader epoch.
    Both are non-retriable, so a stale consumer sees its commit refused instead of
    retrying it in a loop."""
    if commit.metadata is not None and len(commit.metadata.encode()) > max_metadata_bytes:
        return ErrorCode.OFFSET_METADATA_TOO_LARGE
    if reject_stale_epoch and is_from_earlier_topic(commit):
        return ErrorCode.INVALID_PARTITION_EPOCH
    if reject_stale_epoch and is_stale_epoch(current, commit):
        return ErrorCode.INVALID_LEADER_EPOCH
    return ErrorCode.NONE


def append_error_to_commit_error(code: ErrorCode) -> ErrorCode:
    """How a failed write to ``__consumer_offsets`` is reported to the committer
    (Kafka's mapping: retriable coordinator errors, or an offset-size error)."""
    if code in (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.REQUEST_TIMED_OUT,
    ):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH):
        return ErrorCode.NOT_COORDINATOR
    if code in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE):
        return ErrorCode.INVALID_COMMIT_OFFSET_SIZE
    return code if code == ErrorCode.NONE else ErrorCode.UNKNOWN_SERVER_ERROR
