"""Committed offsets: OffsetCommit, OffsetFetch, OffsetDelete, DeleteGroups, and the
periodic KIP-211 expiry, all stored in ``__consumer_offsets`` before they are visible."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from epochlog.coordinator.commits import (
    CommitRequest,
    append_error_to_commit_error,
    group_commit_error,
    is_stale_epoch,
    partition_commit_error,
    txn_commit_error,
)
from epochlog.coordinator.expiry import expired_offsets, goes_dead
from epochlog.coordinator.group import (
    CONSUMER_PROTOCOL,
    CommittedOffset,
    Group,
    GroupState,
    merge_newer,
)
from epochlog.coordinator.records import (
    GroupKey,
    OffsetKey,
    OffsetValue,
    encode_group_key,
    encode_offset_key,
    encode_offset_value,
)
from epochlog.coordinator.registry import GroupRegistry
from epochlog.coordinator.store import TxnProducer
from epochlog.protocol.errors import ErrorCode

log = logging.getLogger("epochlog.coordinator")

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class FetchedOffset:
    offset: int
    leader_epoch: int
    metadata: str
    error: ErrorCode = ErrorCode.NONE


NO_OFFSET = FetchedOffset(-1, -1, "")


class OffsetManager:
    def __init__(self, registry: GroupRegistry) -> None:
        self.r = registry
        # Committed offsets expired since the broker started (epochlog_group_offsets_expired).
        self.expired = 0

    # -- OffsetCommit ------------------------------------------------------------------

    async def commit(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        instance_id: str | None,
        offsets: dict[TopicPartition, CommitRequest],
    ) -> dict[TopicPartition, ErrorCode]:
        """Store what passes the checks; each partition gets its own answer. Partitions
        of unknown topics must be filtered out by the caller (it knows the metadata)."""
        error = self.r.ownership_error(group_id) if group_id else ErrorCode.INVALID_GROUP_ID
        group = self.r.groups.get(group_id)
        if error == ErrorCode.NONE:
            error = group_commit_error(group, generation_id, member_id, instance_id)
        if error != ErrorCode.NONE:
            return dict.fromkeys(offsets, error)
        if group is None:
            # A standalone committer: the group exists only to hold offsets.
            group = Group(group_id, state_timestamp_ms=self.r.now_ms())
            self.r.groups[group_id] = group
        member = group.members.get(member_id)
        if member is not None:
            member.heartbeat_deadline = self.r.now() + member.session_timeout_ms / 1000
        s = self.r.settings
        answers: dict[TopicPartition, ErrorCode] = {}
        accepted: list[tuple[TopicPartition, CommittedOffset]] = []
        now_ms = self.r.now_ms()
        for key, request in offsets.items():
            current = group.offsets.get(key)
            code = partition_commit_error(
                current, request, s.max_metadata_bytes, s.reject_stale_leader_epoch
            )
            if code == ErrorCode.INVALID_LEADER_EPOCH and current is not None:
                log.warning(
                    "group %s: refused stale commit of %s-%d: offset %d in leader epoch %d,"
                    " but offset %d was committed in the newer epoch %d",
                    group_id,
                    key[0],
                    key[1],
                    request.offset,
                    request.leader_epoch,
                    current.offset,
                    current.leader_epoch,
                )
            elif code == ErrorCode.INVALID_PARTITION_EPOCH:
                log.warning(
                    "group %s: refused commit of %s-%d: offset %d in leader epoch %d, but the"
                    " partition's epochs end at %d: the topic was re-created since",
                    group_id,
                    key[0],
                    key[1],
                    request.offset,
                    request.leader_epoch,
                    request.partition_leader_epoch,
                )
            answers[key] = code
            if code == ErrorCode.NONE:
                accepted.append(
                    (
                        key,
                        CommittedOffset(
                            request.offset, request.leader_epoch, request.metadata or "", now_ms
                        ),
                    )
                )
        if not accepted:
            return answers
        code = await self._store(group, accepted)
        for key, _ in accepted:
            answers[key] = code
        return answers

    async def _store(
        self,
        group: Group,
        accepted: list[tuple[TopicPartition, CommittedOffset]],
        producer: TxnProducer | None = None,
    ) -> ErrorCode:
        """Write offsets that passed the checks; once stored they are committed, or, in a
        transaction (``producer``), pending until its marker."""
        records = [
            (
                encode_offset_key(OffsetKey(group.group_id, topic, partition)),
                encode_offset_value(
                    OffsetValue(c.offset, c.leader_epoch, c.metadata, c.commit_timestamp)
                ),
            )
            for (topic, partition), c in accepted
        ]
        code, base_offset = await self.r.append_at(group.group_id, records, producer)
        code = append_error_to_commit_error(code)
        if code != ErrorCode.NONE:
            return code
        if self.r.groups.get(group.group_id) is not group:
            return ErrorCode.NOT_COORDINATOR
        stored = {}
        for i, (key, committed) in enumerate(accepted):
            committed.log_offset = base_offset + i
            stored[key] = committed
        if producer is None:
            merge_newer(group.offsets, stored)
        else:
            group.pending_txn_offsets.setdefault(producer.producer_id, {}).update(stored)
        return ErrorCode.NONE

    # -- TxnOffsetCommit ----------------------------------------------------------------

    async def txn_commit(
        self,
        group_id: str,
        producer: TxnProducer,
        generation_id: int,
        member_id: str,
        instance_id: str | None,
        offsets: dict[TopicPartition, CommitRequest],
    ) -> dict[TopicPartition, ErrorCode]:
        """Offsets committed inside a transaction: written as a transactional batch of
        the producer and held pending until its marker decides them
        (``complete_txn_offsets``)."""
        error = self.r.ownership_error(group_id) if group_id else ErrorCode.INVALID_GROUP_ID
        group = self.r.groups.get(group_id)
        if error == ErrorCode.NONE:
            error = txn_commit_error(group, generation_id, member_id, instance_id)
        if error != ErrorCode.NONE:
            return dict.fromkeys(offsets, error)
        if group is None:
            group = Group(group_id, state_timestamp_ms=self.r.now_ms())
            self.r.groups[group_id] = group
        max_bytes = self.r.settings.max_metadata_bytes
        answers: dict[TopicPartition, ErrorCode] = {}
        accepted: list[tuple[TopicPartition, CommittedOffset]] = []
        now_ms = self.r.now_ms()
        for key, request in offsets.items():
            answers[key] = partition_commit_error(None, request, max_bytes, False)
            if answers[key] == ErrorCode.NONE:
                committed = CommittedOffset(
                    request.offset, request.leader_epoch, request.metadata or "", now_ms
                )
                accepted.append((key, committed))
        if not accepted:
            return answers
        code = await self._store(group, accepted, producer)
        for key, _ in accepted:
            answers[key] = code
        return answers

    def complete_txn_offsets(self, offsets_partition: int, producer_id: int, commit: bool) -> None:
        """A marker of ``producer_id`` on this offsets partition was written."""
        for group_id, group in list(self.r.groups.items()):
            mine = self.r.partition_of(group_id) == offsets_partition
            if mine and producer_id in group.pending_txn_offsets:
                group.complete_txn_offsets(producer_id, commit)

    # -- OffsetFetch -------------------------------------------------------------------

    def fetch(
        self, group_id: str, wanted: list[TopicPartition] | None, require_stable: bool = False
    ) -> tuple[ErrorCode, dict[TopicPartition, FetchedOffset]]:
        """Committed offsets (all of the group's when ``wanted`` is None); -1 where none.
        With ``require_stable``, a partition with a transactional commit not decided yet
        answers UNSTABLE_OFFSET_COMMIT (the client retries)."""
        error = self.r.ownership_error(group_id)
        if error != ErrorCode.NONE:
            return error, {key: FetchedOffset(-1, -1, "", error) for key in wanted or []}
        group = self.r.groups.get(group_id)
        offsets = group.offsets if group is not None and not group.is_(GroupState.DEAD) else {}
        keys = sorted(offsets) if wanted is None else wanted
        answer = {}
        for key in keys:
            c = offsets.get(key)
            if require_stable and group is not None and group.has_pending_offset(key):
                answer[key] = FetchedOffset(-1, -1, "", ErrorCode.UNSTABLE_OFFSET_COMMIT)
                continue
            answer[key] = (
                NO_OFFSET if c is None else FetchedOffset(c.offset, c.leader_epoch, c.metadata)
            )
        return ErrorCode.NONE, answer

    # -- OffsetDelete ------------------------------------------------------------------

    async def delete_offsets(
        self, group_id: str, partitions: list[TopicPartition]
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        error = self.r.ownership_error(group_id)
        if error != ErrorCode.NONE:
            return error, {}
        group = self.r.groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return ErrorCode.GROUP_ID_NOT_FOUND, {}
        answers: dict[TopicPartition, ErrorCode] = {}
        deletable = []
        for key in partitions:
            if group.is_(GroupState.EMPTY):
                subscribed = False
            elif group.protocol_type == CONSUMER_PROTOCOL:
                topics = group.subscribed_topics
                subscribed = topics is None or key[0] in topics
            else:
                return ErrorCode.NON_EMPTY_GROUP, {}
            if subscribed:
                answers[key] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
            else:
                answers[key] = ErrorCode.NONE
                if key in group.offsets:
                    deletable.append(key)
        if deletable:
            code = await self._tombstone(group, deletable, with_group=False)
            for key in deletable:
                answers[key] = code
        return ErrorCode.NONE, answers

    async def _tombstone(
        self, group: Group, keys: list[TopicPartition], with_group: bool
    ) -> ErrorCode:
        """Write tombstones for offsets (and the group); forget them once stored."""
        records: list[tuple[bytes, bytes | None]] = [
            (encode_offset_key(OffsetKey(group.group_id, t, p)), None) for t, p in keys
        ]
        if with_group:
            records.append((encode_group_key(GroupKey(group.group_id)), None))
        removed = {key: group.offsets.get(key) for key in keys}
        code = append_error_to_commit_error(await self.r.append(group.group_id, records))
        if code == ErrorCode.NONE:
            for key, committed in removed.items():
                if group.offsets.get(key) is committed:
                    group.offsets.pop(key, None)
        return code

    # -- DeleteGroups ------------------------------------------------------------------

    async def delete_group(self, group_id: str) -> ErrorCode:
        error = self.r.ownership_error(group_id)
        if error != ErrorCode.NONE:
            return error
        group = self.r.groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return ErrorCode.GROUP_ID_NOT_FOUND
        if not group.is_(GroupState.EMPTY):
            return ErrorCode.NON_EMPTY_GROUP
        code = await self._tombstone(group, sorted(group.offsets), with_group=True)
        if code == ErrorCode.NONE and group.is_(GroupState.EMPTY) and not group.members:
            self._bury(group)
        return code

    def _bury(self, group: Group) -> None:
        group.transition(GroupState.DEAD, self.r.now_ms())
        if self.r.groups.get(group.group_id) is group:
            del self.r.groups[group.group_id]

    # -- a deleted topic ---------------------------------------------------------------

    async def forget_topic(self, topic: str) -> int:
        """Remove every committed offset of a deleted topic, as Kafka's coordinator does
        when partitions are deleted (a topic re-created under the name starts with
        none); a group left Empty with nothing goes Dead. Returns how many went."""
        total = 0
        for group in self.r.owned_groups():
            keys = sorted(key for key in group.offsets if key[0] == topic)
            if not keys or group.group_id in self.r.pending_writes:
                continue
            dead = goes_dead_after(group, keys)
            code = await self._tombstone(group, keys, with_group=dead)
            if code != ErrorCode.NONE:
                log.warning("group %s: removing offsets of deleted %s failed: %s",
                            group.group_id, topic, code.name)  # fmt: skip
                continue
            total += len(keys)
            if dead and goes_dead(group):
                self._bury(group)
        if total:
            log.info("deleted topic %s: %d committed offsets removed", topic, total)
        return total

    # -- KIP-211 expiry ----------------------------------------------------------------

    async def expire(self) -> int:
        """Remove expired offsets with tombstones; Empty groups left without offsets go
        Dead. Returns how many offsets expired."""
        now_ms = self.r.now_ms()
        total = 0
        for group in self.r.owned_groups():
            if group.group_id in self.r.pending_writes or group.pending_txn_offsets:
                continue
            keys = expired_offsets(group, now_ms, self.r.settings.retention_ms)
            dead = goes_dead_after(group, keys)
            if not keys and not dead:
                continue
            code = await self._tombstone(group, keys, with_group=dead)
            if code != ErrorCode.NONE:
                log.warning("group %s: expiring offsets failed: %s", group.group_id, code.name)
                continue
            total += len(keys)
            self.expired += len(keys)
            if keys:
                log.info(
                    "group %s (%s): %d committed offsets expired",
                    group.group_id,
                    group.state.value,
                    len(keys),
                )
            if dead and goes_dead(group):
                log.info("group %s: no members and no offsets left, now Dead", group.group_id)
                self._bury(group)
        return total


def goes_dead_after(group: Group, expiring: list[TopicPartition]) -> bool:
    """Whether the group is left Empty with nothing once ``expiring`` is gone."""
    return (
        group.is_(GroupState.EMPTY)
        and not group.members
        and all(key in expiring for key in group.offsets)
    )


__all__ = ["CommitRequest", "FetchedOffset", "OffsetManager", "is_stale_epoch"]
