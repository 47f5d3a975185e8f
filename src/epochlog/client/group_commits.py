"""Commits of a consumer group member (mixed into GroupMembership): OffsetCommit v8
with each position's leader epoch and OffsetFetch v8 returning it, so that a member
starting from a committed offset can validate it (KIP-320). Refusals that mean the
group moved on raise CommitFailedError and make the member rejoin; a moved or loading
coordinator is found again and the request retried until ``request.timeout.ms``."""

from __future__ import annotations

import abc
import logging
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from kafka.protocol.consumer import OffsetCommitRequest, OffsetFetchRequest

from epochlog.client.errors import ClientError, KafkaClientError, TopicPartition
from epochlog.client.fetched import OffsetAndEpoch
from epochlog.client.positions import Phase
from epochlog.protocol.errors import ErrorCode
from epochlog.seams import Clock


class MemberConsumer(Protocol):
    """What a group member drives of its consumer: only its public assignment and
    positions (AsyncConsumer is one; the group depends on this, not on it)."""

    config: dict[str, Any]

    def assign(self, partitions: Iterable[TopicPartition]) -> None: ...

    def assignment(self) -> list[TopicPartition]: ...

    def seek(self, tp: TopicPartition, offset: int, leader_epoch: int | None = None) -> None: ...

    def position(self, tp: TopicPartition) -> OffsetAndEpoch | None: ...

    def phase(self, tp: TopicPartition) -> Phase: ...


log = logging.getLogger("epochlog.client.group")
# A planted bug for the simulator's tests (tests/sim/test_sim_planted.py), never set
# otherwise: offsets are committed without the leader epoch of the record before them.
_PLANTED_COMMIT_WITHOUT_EPOCH = False

OFFSET_COMMIT_VERSION = 8
OFFSET_FETCH_VERSION = 8
NO_GENERATION = -1
# The coordinator moved or is not ready: find it again (or wait) and retry.
COORDINATOR_ERRORS = {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE}
RETRY_ERRORS = {ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.UNSTABLE_OFFSET_COMMIT}
# The membership this client holds is over: rejoin.
MEMBERSHIP_ERRORS = {
    ErrorCode.REBALANCE_IN_PROGRESS,
    ErrorCode.ILLEGAL_GENERATION,
    ErrorCode.UNKNOWN_MEMBER_ID,
}


class CommitFailedError(ClientError):
    """A commit refused because the group rebalanced (the generation or member id this
    consumer held is over); the partitions may now belong to another member."""

    def __init__(self, group: str, code: ErrorCode) -> None:
        super().__init__(
            f"commit to group {group} refused ({code.name}): the group rebalanced; "
            "the consumer rejoins on its next poll"
        )
        self.code = code


class CoordinatorLost(Exception):
    """The coordinator connection failed or it answered that it is not the coordinator."""


class GroupCommits(abc.ABC):
    """The commit half of a member; GroupMembership supplies the coordinator."""

    _consumer: MemberConsumer
    _clock: Clock
    _request_timeout_s: float
    group_id: str
    member_id: str
    generation: int
    subscription: list[str]
    _stable: bool

    @abc.abstractmethod
    async def _send(self, request: Any, version: int, discover: bool = True) -> Any:
        """One request to the coordinator; raises CoordinatorLost."""

    @abc.abstractmethod
    async def _pause(self, attempt: int) -> None:
        """Back off before the next attempt."""

    @abc.abstractmethod
    def _membership_error(self, code: ErrorCode, what: str) -> None:
        """The membership is over: rejoin on the next poll."""

    @abc.abstractmethod
    def _coordinator_dead(self, why: str) -> None:
        """Forget the coordinator; it is found again on the next request."""

    def consumed_positions(self) -> dict[TopicPartition, OffsetAndEpoch]:
        """The positions after the records already returned (fetching partitions only;
        one awaiting validation or reset has nothing new to commit)."""
        out = {}
        for tp in self._consumer.assignment():
            position = self._consumer.position(tp)
            if position is not None and self._consumer.phase(tp) is Phase.FETCHING:
                out[tp] = position
        return out

    async def _commit_quietly(self, why: str) -> None:
        try:
            await self.commit()
        except (ClientError, ConnectionError, OSError, TimeoutError) as exc:
            log.warning("group %s: commit %s failed: %s", self.group_id, why, exc)

    async def commit(self, offsets: Mapping[TopicPartition, OffsetAndEpoch] | None = None) -> None:
        """OffsetCommit v8 with each position's leader epoch; by default the positions
        after the records already returned. Raises CommitFailedError after a rebalance."""
        if self.subscription and not (self._stable and self.generation != NO_GENERATION):
            # Subscribed but out of the group (rejoining, or left): the partitions may
            # be another member's now; Kafka's consumers refuse such a commit too.
            code = (
                ErrorCode.REBALANCE_IN_PROGRESS if self.member_id else ErrorCode.UNKNOWN_MEMBER_ID
            )
            raise CommitFailedError(self.group_id, code)
        wanted = dict(self.consumed_positions() if offsets is None else offsets)
        attempt = 0
        deadline = self._clock.monotonic() + self._request_timeout_s
        while wanted:
            failed = await self._commit_once(wanted)
            if failed is None:
                return
            if self._clock.monotonic() >= deadline:
                raise KafkaClientError(failed, f"OffsetCommit of group {self.group_id}")
            await self._pause(attempt)
            attempt += 1

    async def _commit_once(self, offsets: Mapping[TopicPartition, OffsetAndEpoch]) -> Any:
        """None when stored; else the retriable error met (NOT_COORDINATOR etc.)."""
        partition_cls = OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition
        by_topic: dict[str, list[Any]] = {}
        for tp, at in sorted(offsets.items()):
            by_topic.setdefault(tp.topic, []).append(
                partition_cls(
                    partition_index=tp.partition,
                    committed_offset=at.offset,
                    committed_leader_epoch=-1
                    if at.leader_epoch is None or _PLANTED_COMMIT_WITHOUT_EPOCH
                    else at.leader_epoch,
                    committed_metadata="",
                )
            )
        in_group = bool(self.member_id) and self.generation != NO_GENERATION
        request = OffsetCommitRequest(
            group_id=self.group_id,
            generation_id_or_member_epoch=self.generation if in_group else NO_GENERATION,
            member_id=self.member_id if in_group else "",
            group_instance_id=None,
            topics=[
                OffsetCommitRequest.OffsetCommitRequestTopic(name=name, partitions=parts)
                for name, parts in by_topic.items()
            ],
        )
        try:
            response = await self._send(request, OFFSET_COMMIT_VERSION)
        except CoordinatorLost:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        errors = {
            TopicPartition(t.name, p.partition_index): ErrorCode(p.error_code)
            for t in response.topics
            for p in t.partitions
            if p.error_code != ErrorCode.NONE
        }
        if not errors:
            return None
        codes = set(errors.values())
        for code in codes & MEMBERSHIP_ERRORS:
            self._membership_error(code, "OffsetCommit")
            raise CommitFailedError(self.group_id, code)
        if codes & COORDINATOR_ERRORS:
            self._coordinator_dead(", ".join(sorted(c.name for c in codes)))
        retriable = COORDINATOR_ERRORS | RETRY_ERRORS | {ErrorCode.REQUEST_TIMED_OUT}
        fatal = codes - retriable
        if fatal:
            code = min(fatal)
            bad = ", ".join(str(tp) for tp, c in errors.items() if c in fatal)
            raise KafkaClientError(code, f"OffsetCommit of group {self.group_id}: {bad}")
        return min(codes)

    async def committed(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, OffsetAndEpoch | None]:
        """OffsetFetch v8: the committed offset with its leader epoch, None if none."""
        wanted = sorted(set(partitions))
        by_topic: dict[str, list[int]] = {}
        for tp in wanted:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        group_cls = OffsetFetchRequest.OffsetFetchRequestGroup
        request = OffsetFetchRequest(
            groups=[
                group_cls(
                    group_id=self.group_id,
                    topics=[
                        group_cls.OffsetFetchRequestTopics(name=t, partition_indexes=ps)
                        for t, ps in by_topic.items()
                    ],
                )
            ],
            require_stable=False,
        )
        attempt = 0
        deadline = self._clock.monotonic() + self._request_timeout_s
        while True:
            code = ErrorCode.COORDINATOR_NOT_AVAILABLE
            try:
                response = await self._send(request, OFFSET_FETCH_VERSION)
            except CoordinatorLost:
                response = None
            if response is not None:
                (group,) = response.groups
                code = ErrorCode(group.error_code)
                out: dict[TopicPartition, OffsetAndEpoch | None] = {tp: None for tp in wanted}
                for t in group.topics if code == ErrorCode.NONE else []:
                    for p in t.partitions:
                        pcode = ErrorCode(p.error_code)
                        if pcode != ErrorCode.NONE:
                            code = pcode
                            break
                        if p.committed_offset >= 0:
                            epoch = p.committed_leader_epoch
                            out[TopicPartition(t.name, p.partition_index)] = OffsetAndEpoch(
                                p.committed_offset, epoch if epoch >= 0 else None
                            )
                if code == ErrorCode.NONE:
                    return out
                if code in COORDINATOR_ERRORS:
                    self._coordinator_dead(code.name)
                elif code not in RETRY_ERRORS:
                    raise KafkaClientError(code, f"OffsetFetch of group {self.group_id}")
            if self._clock.monotonic() >= deadline:
                raise KafkaClientError(code, f"OffsetFetch of group {self.group_id}")
            await self._pause(attempt)
            attempt += 1
