"""The group APIs of one in-process broker over a real socket: answers and error paths."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

from kafka.protocol.admin import (
    CreateTopicsRequest,
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    ListGroupsRequest,
)
from kafka.protocol.consumer import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.protocol.producer import TxnOffsetCommitRequest

from broker.inprocess_broker import batch, connect, delete_topic, produce, run, running_broker
from epochlog.client.connection import BrokerConnection
from epochlog.protocol.errors import ErrorCode

SETTINGS = {
    "offsets.topic.num.partitions": "3",
    "offsets.topic.replication.factor": "1",
    "group.initial.rebalance.delay.ms": "0",
    "offset.metadata.max.bytes": "16",
}


def subscription(*topics: str) -> bytes:
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


async def create_topic(conn: BrokerConnection, name: str, partitions: int) -> None:
    topic = CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1, assignments=[], configs=[]
    )
    response = await conn.send(
        CreateTopicsRequest(topics=[topic], timeout_ms=10000, validate_only=False), 7
    )
    assert response.topics[0].error_code == 0


async def find(conn: BrokerConnection, group: str, version: int = 3) -> Any:
    if version >= 4:
        request = FindCoordinatorRequest(key_type=0, coordinator_keys=[group])
    else:
        request = FindCoordinatorRequest(key=group, key_type=0)
    return await conn.send(request, version)


async def join(conn: BrokerConnection, group: str, member_id: str = "", **kw: Any) -> Any:
    request = JoinGroupRequest(
        group_id=group,
        session_timeout_ms=kw.get("session_timeout_ms", 10000),
        rebalance_timeout_ms=10000,
        member_id=member_id,
        group_instance_id=kw.get("instance"),
        protocol_type="consumer",
        protocols=[
            JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=subscription("t"))
        ],
    )
    return await conn.send(request, kw.get("version", 7))


async def join_and_sync(conn: BrokerConnection, group: str) -> tuple[str, int]:
    first = await join(conn, group)
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
    answer = await join(conn, group, first.member_id)
    assert answer.error_code == 0 and answer.leader == answer.member_id
    sync = await conn.send(
        SyncGroupRequest(
            group_id=group,
            generation_id=answer.generation_id,
            member_id=answer.member_id,
            assignments=[
                SyncGroupRequest.SyncGroupRequestAssignment(
                    member_id=answer.member_id, assignment=b"mine"
                )
            ],
        ),
        5,
    )
    assert sync.error_code == 0 and sync.assignment == b"mine"
    return answer.member_id, answer.generation_id


def commit_request(group: str, member: str, generation: int, parts: list[tuple]) -> Any:
    topics: dict[str, list] = {}
    for topic, index, offset, epoch, metadata in parts:
        topics.setdefault(topic, []).append(
            OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                partition_index=index,
                committed_offset=offset,
                committed_leader_epoch=epoch,
                committed_metadata=metadata,
            )
        )
    return OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=generation,
        member_id=member,
        retention_time_ms=1,
        topics=[
            OffsetCommitRequest.OffsetCommitRequestTopic(name=n, partitions=p)
            for n, p in topics.items()
        ],
    )


def codes(response: Any) -> dict[tuple[str, int], int]:
    return {
        (t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions
    }


async def fetch(conn: BrokerConnection, group: str, version: int) -> dict:
    if version >= 8:
        request = OffsetFetchRequest(
            groups=[OffsetFetchRequest.OffsetFetchRequestGroup(group_id=group, topics=None)]
        )
        response = await conn.send(request, version)
        (g,) = response.groups
        assert g.error_code == 0
        topics = g.topics
    else:
        request = OffsetFetchRequest(
            group_id=group,
            topics=[OffsetFetchRequest.OffsetFetchRequestTopic(name="t", partition_indexes=[0, 1])],
        )
        response = await conn.send(request, version)
        topics = response.topics
    return {
        (t.name, p.partition_index): (p.committed_offset, p.committed_leader_epoch, p.metadata)
        for t in topics
        for p in t.partitions
    }


async def coordinator_loaded(broker: Any, conn: BrokerConnection, group: str) -> None:
    """Wait, as a client retries, while a restarted broker is not yet the group's
    coordinator again (NOT_COORDINATOR until the controller has re-elected it, then
    COORDINATOR_LOAD_IN_PROGRESS while it reads the offsets back)."""
    request = OffsetFetchRequest(
        groups=[OffsetFetchRequest.OffsetFetchRequestGroup(group_id=group, topics=None)]
    )
    retriable = {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS}
    for _ in range(200):
        (answer,) = (await conn.send(request, 8)).groups
        if answer.error_code not in retriable:
            return
        await broker.seams.clock.sleep(0.05)
    raise AssertionError(f"group {group!r} still has no loaded coordinator after 10 s")


def test_find_coordinator_creates_the_internal_topic_and_names_this_broker(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path, **SETTINGS) as broker:
            conn = await connect(broker)
            v3 = await find(conn, "g")
            assert (v3.error_code, v3.node_id, v3.port) == (0, 0, broker.port)
            v4 = await find(conn, "g", version=4)
            assert [(c.key, c.node_id, c.error_code) for c in v4.coordinators] == [("g", 0, 0)]
            topic = broker.metadata_cache.topic("__consumer_offsets")
            assert topic is not None and len(topic.partitions) == 3
            assert topic.configs["cleanup.policy"] == "compact"
            bad = await conn.send(FindCoordinatorRequest(key="tx", key_type=2), 3)
            assert bad.error_code == ErrorCode.INVALID_REQUEST

    run(scenario)


def test_membership_errors(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path, **SETTINGS) as broker:
            conn = await connect(broker)
            await find(conn, "g")
            member, generation = await join_and_sync(conn, "g")

            def hb(gen: int, mid: str) -> HeartbeatRequest:
                return HeartbeatRequest(group_id="g", generation_id=gen, member_id=mid)

            assert (await conn.send(hb(generation, member), 4)).error_code == 0
            wrong = await conn.send(hb(generation + 1, member), 4)
            assert wrong.error_code == ErrorCode.ILLEGAL_GENERATION
            stranger = await conn.send(hb(generation, "nobody"), 4)
            assert stranger.error_code == ErrorCode.UNKNOWN_MEMBER_ID
            unknown = await join(conn, "other", "made-up")
            assert unknown.error_code == ErrorCode.UNKNOWN_MEMBER_ID
            short = await join(conn, "g", session_timeout_ms=10)
            assert short.error_code == ErrorCode.INVALID_SESSION_TIMEOUT
            empty = await join(conn, "")
            assert empty.error_code == ErrorCode.INVALID_GROUP_ID
            old = await join(conn, "v3group", version=3)  # before v4 no MEMBER_ID_REQUIRED
            assert old.error_code == 0 and old.generation_id == 1

            described = await conn.send(DescribeGroupsRequest(groups=["g", "none"]), 5)
            g, none = described.groups
            assert (g.group_state, g.protocol_type, g.protocol_data) == (
                "Stable",
                "consumer",
                "range",
            )
            assert [m.member_id for m in g.members] == [member]
            assert g.members[0].member_assignment == b"mine"
            assert none.group_state == "Dead"
            listed = await conn.send(ListGroupsRequest(states_filter=["Stable"]), 4)
            assert {x.group_id for x in listed.groups} == {"g"}

            deleted = await conn.send(DeleteGroupsRequest(groups_names=["g", "none"]), 2)
            assert [r.error_code for r in deleted.results] == [
                ErrorCode.NON_EMPTY_GROUP,
                ErrorCode.GROUP_ID_NOT_FOUND,
            ]
            left = await conn.send(
                LeaveGroupRequest(
                    group_id="g",
                    members=[LeaveGroupRequest.MemberIdentity(member_id=member)],
                ),
                4,
            )
            assert left.error_code == 0 and left.members[0].error_code == 0
            described = await conn.send(DescribeGroupsRequest(groups=["g"]), 5)
            assert described.groups[0].group_state == "Empty"
            deleted = await conn.send(DeleteGroupsRequest(groups_names=["g"]), 2)
            assert deleted.results[0].error_code == 0

    run(scenario)


def test_commit_errors_store_nothing_and_fetch_returns_epochs(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path, **SETTINGS) as broker:
            conn = await connect(broker)
            await create_topic(conn, "t", 2)
            await find(conn, "g")
            member, generation = await join_and_sync(conn, "g")
            response = await conn.send(
                commit_request(
                    "g",
                    member,
                    generation,
                    [
                        ("t", 0, 10, 3, "ok"),
                        ("t", 1, 11, 3, "x" * 17),
                        ("t", 9, 12, 3, None),
                        ("nope", 0, 13, 3, None),
                    ],
                ),
                8,
            )
            assert codes(response) == {
                ("t", 0): 0,
                ("t", 1): ErrorCode.OFFSET_METADATA_TOO_LARGE,
                ("t", 9): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                ("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            }
            response = await conn.send(
                commit_request("g", member, generation + 1, [("t", 1, 99, 3, None)]), 8
            )
            assert codes(response) == {("t", 1): ErrorCode.ILLEGAL_GENERATION}
            assert await fetch(conn, "g", 8) == {("t", 0): (10, 3, "ok")}
            assert await fetch(conn, "g", 5) == {("t", 0): (10, 3, "ok"), ("t", 1): (-1, -1, "")}
            v1 = await fetch(conn, "g", 1)
            assert v1[("t", 0)][0] == 10
            # v2 carries a retention of 1 ms: ignored (KIP-211), the offset stays.
            response = await conn.send(
                commit_request("standalone", "", -1, [("t", 1, 7, -1, None)]), 2
            )
            assert codes(response) == {("t", 1): 0}
            assert (await fetch(conn, "standalone", 8))[("t", 1)][0] == 7

            deleted = await conn.send(
                OffsetDeleteRequest(
                    group_id="g",
                    topics=[
                        OffsetDeleteRequest.OffsetDeleteRequestTopic(
                            name="t",
                            partitions=[
                                OffsetDeleteRequest.OffsetDeleteRequestTopic.OffsetDeleteRequestPartition(
                                    partition_index=0
                                )
                            ],
                        )
                    ],
                ),
                0,
            )
            assert deleted.error_code == 0
            assert deleted.topics[0].partitions[0].error_code == ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC

    run(scenario)


def test_offset_fetch_from_a_broker_that_is_not_the_coordinator_answers_for_the_group(
    tmp_path: Path,
) -> None:
    """From v2 the error is the group's alone, with no partitions, as Kafka answers:
    librdkafka re-finds the coordinator and retries a group's error but takes one on a
    partition as final, and an assigned partition was then never read (seen after a
    whole cluster restarted). v1 has no group error field, so the partitions carry it."""

    def request(version: int) -> OffsetFetchRequest:
        if version >= 8:
            topic = OffsetFetchRequest.OffsetFetchRequestGroup.OffsetFetchRequestTopics
            group = OffsetFetchRequest.OffsetFetchRequestGroup(
                group_id="g", topics=[topic(name="t", partition_indexes=[0])]
            )
            return OffsetFetchRequest(groups=[group], require_stable=False)
        topics = [OffsetFetchRequest.OffsetFetchRequestTopic(name="t", partition_indexes=[0])]
        return OffsetFetchRequest(group_id="g", topics=topics)

    async def scenario() -> dict[int, tuple[int, dict]]:
        async with running_broker(tmp_path, **SETTINGS) as broker:
            conn = await connect(broker)
            await create_topic(conn, "t", 1)
            answers = {}
            for version in (8, 7, 2):  # no FindCoordinator yet: nobody coordinates "g"
                response = await conn.send(request(version), version)
                answer = response.groups[0] if version >= 8 else response
                answers[version] = (answer.error_code, codes(answer))
            v1 = await conn.send(request(1), 1)
            answers[1] = (-1, codes(v1))
            await conn.close()
            return answers

    not_coordinator = ErrorCode.NOT_COORDINATOR
    assert run(scenario) == {
        8: (not_coordinator, {}),
        7: (not_coordinator, {}),
        2: (not_coordinator, {}),
        1: (-1, {("t", 0): not_coordinator}),
    }


def test_a_txn_offset_commit_while_the_group_loads_is_coordinator_not_available_before_v2(
    tmp_path: Path,
) -> None:
    """As Kafka answers: a producer of TxnOffsetCommit v0-v1 (Kafka's clients before 2.0)
    does not retry COORDINATOR_LOAD_IN_PROGRESS, so it is told the coordinator is not
    available; v2 on get the loading error itself."""
    topic_cls = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
    partition_cls = topic_cls.TxnOffsetCommitRequestPartition

    def commit(version: int) -> TxnOffsetCommitRequest:
        part = partition_cls(
            partition_index=0, committed_offset=5, committed_leader_epoch=-1,
            committed_metadata=None,
        )  # fmt: skip
        return TxnOffsetCommitRequest(
            transactional_id="tx", group_id="g", producer_id=7, producer_epoch=0,
            generation_id=-1, member_id="", group_instance_id=None,
            topics=[topic_cls(name="t", partitions=[part])],
        )  # fmt: skip

    async def scenario() -> dict[int, dict]:
        async with running_broker(tmp_path, **SETTINGS) as broker:
            conn = await connect(broker)
            await create_topic(conn, "t", 1)
            await find(conn, "g")
            await coordinator_loaded(broker, conn, "g")
            registry = broker.coordinator.registry
            index = registry.partition_of("g")
            registry.loading[index] = registry.owned[index]  # as a new leader's load
            answers = {v: codes(await conn.send(commit(v), v)) for v in (0, 1, 2, 3)}
            del registry.loading[index]
            await conn.close()
            return answers

    loading = {("t", 0): ErrorCode.COORDINATOR_LOAD_IN_PROGRESS}
    not_available = {("t", 0): ErrorCode.COORDINATOR_NOT_AVAILABLE}
    assert run(scenario) == {0: not_available, 1: not_available, 2: loading, 3: loading}


def test_committed_offsets_and_groups_are_loaded_back_after_a_restart(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path, **SETTINGS) as broker:
            conn = await connect(broker)
            await create_topic(conn, "t", 2)
            await produce(conn, "t", batch([b"a", b"b"]))
            await find(conn, "g")
            member, generation = await join_and_sync(conn, "g")
            for offset in (1, 2):
                response = await conn.send(
                    commit_request("g", member, generation, [("t", 0, offset, 0, "m")]), 8
                )
                assert codes(response) == {("t", 0): 0}
            await conn.close()
        async with running_broker(tmp_path, **SETTINGS) as broker:
            conn = await connect(broker)
            await coordinator_loaded(broker, conn, "g")
            assert await fetch(conn, "g", 8) == {("t", 0): (2, 0, "m")}
            described = await conn.send(DescribeGroupsRequest(groups=["g"]), 5)
            # Loaded with its member, which must heartbeat within its session timeout.
            assert described.groups[0].group_state == "Stable"
            assert [m.member_id for m in described.groups[0].members] == [member]
            hb = HeartbeatRequest(group_id="g", generation_id=generation, member_id=member)
            assert (await conn.send(hb, 4)).error_code == 0

    run(scenario)


def test_deadlines_run_on_the_clock_initial_delay_and_session_timeout(tmp_path: Path) -> None:
    async def scenario() -> None:
        settings = {
            **SETTINGS,
            "group.initial.rebalance.delay.ms": "100",
            "group.min.session.timeout.ms": "100",
        }
        async with running_broker(tmp_path, **settings) as broker:
            conn = await connect(broker)
            await find(conn, "g")
            # The first join is held for the initial delay, then ends on its own.
            answer = await join(conn, "g", version=3, session_timeout_ms=300)
            assert answer.error_code == 0 and answer.generation_id == 1
            # A member that never heartbeats is removed after its session timeout.
            state = "CompletingRebalance"
            while state != "Empty":
                await broker.seams.clock.sleep(0.05)
                described = await conn.send(DescribeGroupsRequest(groups=["g"]), 5)
                state = described.groups[0].group_state
            hb = HeartbeatRequest(group_id="g", generation_id=1, member_id=answer.member_id)
            assert (await conn.send(hb, 4)).error_code == ErrorCode.UNKNOWN_MEMBER_ID

    run(scenario)


def test_a_deleted_topics_committed_offsets_go_and_a_group_left_with_none_is_dead(
    tmp_path: Path,
) -> None:
    """As Kafka's coordinator does on partition deletion: offsets of a deleted topic are
    tombstoned (a re-created topic of the name starts with none), and an Empty group
    whose only offsets they were is gone."""

    async def scenario() -> None:
        async with running_broker(tmp_path, **SETTINGS) as broker:
            conn = await connect(broker)
            await create_topic(conn, "t", 2)
            await create_topic(conn, "kept", 1)
            await find(conn, "both")
            await find(conn, "only-t")
            parts = [("t", 0, 5, 0, ""), ("t", 1, 7, 0, ""), ("kept", 0, 3, 0, "")]
            for group, committed in (("both", parts), ("only-t", parts[:1])):
                response = await conn.send(commit_request(group, "", -1, committed), 8)
                assert set(codes(response).values()) == {0}
            assert await delete_topic(conn, "t") == 0

            async def offsets_of_t_gone() -> bool:
                return ("t", 0) not in await fetch(conn, "both", 8)

            for _ in range(100):
                if await offsets_of_t_gone():
                    break
                await broker.seams.clock.sleep(0.05)
            assert await fetch(conn, "both", 8) == {("kept", 0): (3, 0, "")}
            assert await fetch(conn, "only-t", 8) == {}
            listed = await conn.send(ListGroupsRequest(), 4)
            assert {g.group_id for g in listed.groups} == {"both"}
            await create_topic(conn, "t", 2)
            assert await fetch(conn, "both", 8) == {("kept", 0): (3, 0, "")}
            await conn.close()

    run(scenario)
