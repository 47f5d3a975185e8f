"""The admin client's consumer-group calls: list and describe groups, list, alter and
delete committed offsets (with leader epochs), delete groups. Each call goes to the
group's coordinator (FindCoordinator), found again when it answers NOT_COORDINATOR
and retried while it is loading (COORDINATOR_LOAD_IN_PROGRESS)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from kafka.protocol.admin import DeleteGroupsRequest, DescribeGroupsRequest, ListGroupsRequest
from kafka.protocol.consumer import OffsetCommitRequest, OffsetDeleteRequest, OffsetFetchRequest
from kafka.protocol.metadata import FindCoordinatorRequest

from epochlog.client import assignors
from epochlog.client.connection import BrokerConnection
from epochlog.client.errors import KafkaClientError, TopicPartition
from epochlog.client.metadata import Cluster, backoff_seconds
from epochlog.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from epochlog.client.consumer import OffsetAndEpoch

T = TypeVar("T")
RETRY = {
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_COORDINATOR,
}


@dataclass(frozen=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str


@dataclass(frozen=True)
class MemberDescription:
    member_id: str
    client_id: str
    client_host: str
    assignment: list[TopicPartition]


@dataclass(frozen=True)
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: list[MemberDescription] = field(default_factory=list)
    error: str | None = None


class _Retry(Exception):
    def __init__(self, code: ErrorCode) -> None:
        super().__init__(code.name)
        self.code = code


class GroupAdmin:
    """Mixed into AsyncAdmin: the calls that talk to group coordinators."""

    def __init__(self, cluster: Cluster, timeout_s: float) -> None:
        self._cluster = cluster
        self._timeout_s = timeout_s
        self._coordinators: dict[str, tuple[str, int]] = {}

    async def _close_groups(self) -> None:
        self._coordinators.clear()

    async def _coordinator(self, group: str) -> BrokerConnection:
        address = self._coordinators.get(group)
        if address is None:
            await self._cluster.refresh([])
            request = FindCoordinatorRequest(key_type=0, coordinator_keys=[group])
            answer = None
            for broker in sorted(self._cluster.cache.brokers):  # a dead one may be listed
                try:
                    (answer,) = (await self._cluster.send(broker, request, 4)).coordinators
                    break
                except (ConnectionError, OSError):
                    continue
            if answer is None:
                raise ConnectionError("no broker answered FindCoordinator")
            code = ErrorCode(answer.error_code)
            if code != ErrorCode.NONE:
                raise _Retry(code)
            address = (answer.host, answer.port)
            self._coordinators[group] = address
        return await self._cluster.connection_to(address)

    async def _with_coordinator(
        self, group: str, call: Callable[[BrokerConnection], Awaitable[T]]
    ) -> T:
        """``call`` on the group's coordinator, rediscovered and retried until the
        request timeout when it moved, is loading or the connection broke."""
        clock = self._cluster.clock
        deadline = clock.monotonic() + self._timeout_s
        attempt = 0
        while True:
            try:
                return await call(await self._coordinator(group))
            except _Retry as retry:
                code = retry.code
            except (ConnectionError, OSError):
                code = ErrorCode.COORDINATOR_NOT_AVAILABLE
            if code is not ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                self._coordinators.pop(group, None)
            if clock.monotonic() >= deadline:
                raise KafkaClientError(code, f"group {group}")
            await clock.sleep(backoff_seconds(attempt, 100, 1000))
            attempt += 1

    @staticmethod
    def _check(code: int, what: str) -> None:
        error = ErrorCode(code)
        if error in RETRY:
            raise _Retry(error)
        if error != ErrorCode.NONE:
            raise KafkaClientError(error, what)

    async def list_groups(self, states: Iterable[str] | None = None) -> list[GroupListing]:
        """Groups on every broker (each coordinates some), optionally by state."""
        request = ListGroupsRequest(states_filter=list(states or []))
        clock = self._cluster.clock
        deadline = clock.monotonic() + self._timeout_s
        attempt = 0
        while True:
            await self._cluster.refresh([])
            brokers = sorted(self._cluster.cache.brokers)
            answers = await asyncio.gather(
                *(self._cluster.send(b, request, 4) for b in brokers), return_exceptions=True
            )
            failed = [
                f"broker {b}: {a}"
                for b, a in zip(brokers, answers, strict=True)
                if isinstance(a, BaseException)
            ]
            if not failed:
                break
            if clock.monotonic() >= deadline:
                raise ConnectionError("ListGroups not answered: " + "; ".join(failed))
            await clock.sleep(backoff_seconds(attempt, 100, 1000))
            attempt += 1
        out = {}
        for answer in answers:
            assert not isinstance(answer, BaseException)
            if answer.error_code != ErrorCode.NONE:
                raise KafkaClientError(ErrorCode(answer.error_code), "ListGroups")
            for g in answer.groups:
                out[g.group_id] = GroupListing(g.group_id, g.protocol_type, g.group_state)
        return [out[name] for name in sorted(out)]

    async def describe_groups(self, groups: Iterable[str]) -> dict[str, GroupDescription]:
        """State, protocol and members (with their assignments) of each group."""

        async def one(group: str) -> GroupDescription:
            async def call(conn: BrokerConnection) -> GroupDescription:
                request = DescribeGroupsRequest(groups=[group], include_authorized_operations=False)
                (g,) = (await conn.send(request, 5)).groups
                code = ErrorCode(g.error_code)
                if code in RETRY:
                    raise _Retry(code)
                members = [
                    MemberDescription(
                        m.member_id,
                        m.client_id,
                        m.client_host,
                        assignors.decode_assignment(m.member_assignment)
                        if g.protocol_type == assignors.PROTOCOL_TYPE
                        else [],
                    )
                    for m in g.members
                ]
                return GroupDescription(
                    g.group_id,
                    g.group_state,
                    g.protocol_type,
                    g.protocol_data,
                    members,
                    None if code == ErrorCode.NONE else code.name,
                )

            return await self._with_coordinator(group, call)

        names = list(dict.fromkeys(groups))
        found = await asyncio.gather(*(one(g) for g in names))
        return dict(zip(names, found, strict=True))

    async def list_consumer_group_offsets(
        self, group: str, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, OffsetAndEpoch]:
        """Committed offsets with their leader epochs (all partitions by default)."""
        from epochlog.client.consumer import OffsetAndEpoch

        group_cls = OffsetFetchRequest.OffsetFetchRequestGroup
        topics = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for topic, partition in partitions:
                by_topic.setdefault(topic, []).append(partition)
            topics = [
                group_cls.OffsetFetchRequestTopics(name=t, partition_indexes=sorted(ps))
                for t, ps in sorted(by_topic.items())
            ]
        request = OffsetFetchRequest(
            groups=[group_cls(group_id=group, topics=topics)], require_stable=False
        )

        async def call(conn: BrokerConnection) -> dict[TopicPartition, OffsetAndEpoch]:
            (g,) = (await conn.send(request, 8)).groups
            self._check(g.error_code, f"OffsetFetch of group {group}")
            out = {}
            for t in g.topics:
                for p in t.partitions:
                    self._check(p.error_code, f"OffsetFetch of group {group}")
                    if p.committed_offset >= 0:
                        epoch = p.committed_leader_epoch
                        out[TopicPartition(t.name, p.partition_index)] = OffsetAndEpoch(
                            p.committed_offset, epoch if epoch >= 0 else None
                        )
            return dict(sorted(out.items()))

        return await self._with_coordinator(group, call)

    async def alter_consumer_group_offsets(
        self, group: str, offsets: Mapping[TopicPartition, OffsetAndEpoch]
    ) -> None:
        """Set committed offsets with epochs (the group must have no active members)."""
        partition_cls = OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition
        by_topic: dict[str, list[Any]] = {}
        for tp, at in sorted((TopicPartition(*k), v) for k, v in offsets.items()):
            by_topic.setdefault(tp.topic, []).append(
                partition_cls(
                    partition_index=tp.partition,
                    committed_offset=at.offset,
                    committed_leader_epoch=-1 if at.leader_epoch is None else at.leader_epoch,
                    committed_metadata="",
                )
            )
        request = OffsetCommitRequest(
            group_id=group,
            generation_id_or_member_epoch=-1,
            member_id="",
            group_instance_id=None,
            topics=[
                OffsetCommitRequest.OffsetCommitRequestTopic(name=t, partitions=ps)
                for t, ps in by_topic.items()
            ],
        )

        async def call(conn: BrokerConnection) -> None:
            response = await conn.send(request, 8)
            for t in response.topics:
                for p in t.partitions:
                    self._check(p.error_code, f"OffsetCommit of group {group}: {t.name}")

        await self._with_coordinator(group, call)

    async def delete_consumer_group_offsets(
        self, group: str, partitions: Iterable[TopicPartition]
    ) -> None:
        """OffsetDelete; refused (GROUP_SUBSCRIBED_TO_TOPIC) while members read them."""
        topic_cls = OffsetDeleteRequest.OffsetDeleteRequestTopic
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
        request = OffsetDeleteRequest(
            group_id=group,
            topics=[
                topic_cls(
                    name=t,
                    partitions=[
                        topic_cls.OffsetDeleteRequestPartition(partition_index=p) for p in ps
                    ],
                )
                for t, ps in sorted(by_topic.items())
            ],
        )

        async def call(conn: BrokerConnection) -> None:
            response = await conn.send(request, 0)
            self._check(response.error_code, f"OffsetDelete of group {group}")
            for t in response.topics:
                for p in t.partitions:
                    self._check(p.error_code, f"OffsetDelete of group {group}: {t.name}")

        await self._with_coordinator(group, call)

    async def delete_groups(self, groups: Iterable[str]) -> dict[str, str | None]:
        """Delete groups; per group None or the refusal (e.g. NON_EMPTY_GROUP)."""

        async def one(group: str) -> str | None:
            async def call(conn: BrokerConnection) -> str | None:
                request = DeleteGroupsRequest(groups_names=[group])
                (result,) = (await conn.send(request, 2)).results
                code = ErrorCode(result.error_code)
                if code in RETRY:
                    raise _Retry(code)
                return None if code == ErrorCode.NONE else code.name

            return await self._with_coordinator(group, call)

        names = list(dict.fromkeys(groups))
        found = await asyncio.gather(*(one(g) for g in names))
        return dict(zip(names, found, strict=True))
