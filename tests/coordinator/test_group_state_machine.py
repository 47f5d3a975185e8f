"""The group state machine alone: transitions, joins, protocol choice, sync, fencing."""

from __future__ import annotations

import struct

import pytest

from epochlog.coordinator.group import (
    VALID_PREVIOUS,
    Group,
    GroupState,
    IllegalTransition,
    Member,
)
from epochlog.coordinator.records import decode_group_value, encode_group_value
from epochlog.protocol.errors import ErrorCode

S = GroupState


def subscription(*topics: str) -> bytes:
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


def member(member_id: str, *protocols: str, instance: str | None = None, topics=("t",)) -> Member:
    return Member(
        member_id,
        instance,
        "client",
        "host",
        rebalance_timeout_ms=10_000,
        session_timeout_ms=6_000,
        protocol_type="consumer",
        protocols=[(p, subscription(*topics)) for p in protocols or ("range",)],
    )


def joined(group: Group, m: Member, now: float = 0.0, delay_ms: int = 0) -> None:
    group.add_member(m)
    m.awaiting_join = True
    if group.can_rebalance:
        group.prepare_rebalance(now, 1000, delay_ms)


def test_transition_table_is_kafkas() -> None:
    assert VALID_PREVIOUS[S.STABLE] == {S.COMPLETING_REBALANCE}
    assert VALID_PREVIOUS[S.COMPLETING_REBALANCE] == {S.PREPARING_REBALANCE}
    assert VALID_PREVIOUS[S.EMPTY] == {S.PREPARING_REBALANCE}
    assert VALID_PREVIOUS[S.PREPARING_REBALANCE] == {S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY}
    group = Group("g")
    with pytest.raises(IllegalTransition):
        group.transition(S.STABLE, 0)
    group.transition(S.DEAD, 5)
    assert group.state_timestamp_ms == 5


def test_first_join_completes_when_all_members_joined_and_elects_a_leader() -> None:
    group = Group("g")
    joined(group, member("a"))
    assert group.is_(S.PREPARING_REBALANCE) and group.join_can_complete(0.0)
    answers, removed = group.complete_join(0.0, 2000)
    assert removed == [] and group.is_(S.COMPLETING_REBALANCE)
    assert group.generation_id == 1 and group.leader_id == "a"
    (answer,) = answers
    assert answer.error == ErrorCode.NONE and answer.protocol_name == "range"
    assert [m[0] for m in answer.members] == ["a"]
    assert group.subscribed_topics == {"t"}


def test_initial_delay_holds_the_first_join_and_is_capped_by_the_rebalance_timeout() -> None:
    group = Group("g")
    joined(group, member("a"), now=0.0, delay_ms=3000)
    assert not group.join_can_complete(1.0)
    group.add_member(member("b"))
    group.members["b"].awaiting_join = True
    group.extend_initial_delay(2.5, 3000)
    assert not group.join_can_complete(5.0)
    assert group.join_can_complete(5.5)
    group.extend_initial_delay(9.0, 3000)
    assert group.rebalance_deadline == 10.0  # the rebalance timeout of 10 s caps it


def test_members_that_do_not_rejoin_are_dropped_and_followers_get_no_member_list() -> None:
    group = Group("g")
    joined(group, member("a"))
    group.add_member(member("b"))
    group.members["b"].awaiting_join = True
    group.complete_join(0.0, 1)
    group.complete_sync({"a": b"A", "b": b"B"}, 2)
    assert group.is_(S.STABLE) and group.members["b"].assignment == b"B"
    group.members["a"].awaiting_join = True
    group.prepare_rebalance(1.0, 3, 0)
    assert not group.join_can_complete(1.0)  # b has not rejoined yet
    assert group.join_can_complete(11.0)  # the rebalance timeout passed
    answers, removed = group.complete_join(11.0, 4)
    assert removed == ["b"] and group.generation_id == 2
    assert [a.member_id for a in answers] == ["a"]


def test_protocol_is_the_most_voted_among_those_all_members_support() -> None:
    group = Group("g")
    group.add_member(member("a", "cooperative-sticky", "range"))
    group.add_member(member("b", "range", "cooperative-sticky"))
    group.add_member(member("c", "cooperative-sticky", "range"))
    assert group.select_protocol() == "cooperative-sticky"
    assert not group.supports("consumer", [("roundrobin", b"")])
    assert not group.supports("connect", [("range", b"")])
    assert group.supports("consumer", [("range", b"")])


def test_rebalance_during_completing_interrupts_waiting_syncs() -> None:
    group = Group("g")
    joined(group, member("a"))
    group.add_member(member("b"))
    group.members["b"].awaiting_join = True
    group.complete_join(0.0, 1)
    group.members["b"].awaiting_sync = True
    interrupted = group.prepare_rebalance(0.5, 2, 0)
    assert interrupted == ["b"] and group.is_(S.PREPARING_REBALANCE)


def test_last_member_leaving_ends_in_empty_with_a_new_generation_and_timestamp() -> None:
    group = Group("g")
    joined(group, member("a"))
    group.complete_join(0.0, 1)
    group.complete_sync({}, 2)
    group.remove_member("a")
    group.prepare_rebalance(1.0, 50, 0)
    answers, _ = group.complete_join(1.0, 60)
    assert answers == [] and group.is_(S.EMPTY)
    assert group.generation_id == 2 and group.state_timestamp_ms == 60


def test_static_member_keeps_its_place_under_a_new_id_and_fences_the_old() -> None:
    group = Group("g")
    joined(group, member("a-1", instance="i-a"))
    group.complete_join(0.0, 1)
    assert group.leader_id == "a-1"
    group.replace_static_member("i-a", "a-2")
    assert group.leader_id == "a-2" and group.static_members == {"i-a": "a-2"}
    assert group.is_static_fenced("a-1", "i-a")
    assert not group.is_static_fenced("a-2", "i-a")


def test_group_metadata_round_trips_through_the_record_schema() -> None:
    group = Group("g")
    joined(group, member("a", instance="i"))
    group.complete_join(0.0, 1234)
    group.complete_sync({"a": b"assign"}, 1300)
    value = decode_group_value(encode_group_value(group.to_value()))
    loaded = Group.from_value("g", value, now=100.0)
    assert loaded.is_(S.STABLE) and loaded.generation_id == 1
    assert loaded.members["a"].assignment == b"assign"
    assert loaded.static_members == {"i": "a"}
    assert loaded.members["a"].heartbeat_deadline == 106.0
    assert loaded.subscribed_topics == {"t"}
