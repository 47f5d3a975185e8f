"""epochlog consumers in groups on a 6-partition topic of a real broker process: joins
and leaves rebalance the partitions (range and roundrobin), commits carry leader
epochs and come back, a restarted group resumes at the committed positions, and a
group mixing epochlog members with kafka-python or confluent-kafka ones shares the
topic."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from epochlog.client import CommitFailedError, OffsetAndEpoch, TopicPartition
from support.clients import create_topic
from support.member_threads import (
    HANG_GUARD_S,
    PARTITIONS,
    GroupMember,
    committed,
    counted,
    distinct,
    produce,
    spread,
    stop_all,
    total,
    wait_for,
)

SETTINGS = {
    "offsets.topic.num.partitions": 3,
    "offsets.topic.replication.factor": 1,
    "group.initial.rebalance.delay.ms": 0,
}


@pytest.mark.parametrize("strategy", ["range", "roundrobin"])
def test_three_members_rebalance_commit_epochs_and_resume(broker_factory, strategy: str) -> None:
    broker = broker_factory(SETTINGS)
    bootstrap = broker.bootstrap
    topic, group = f"groups-{strategy}", f"group-{strategy}"
    create_topic(bootstrap, topic, PARTITIONS)
    everyone: list[GroupMember] = []

    def member(name: str) -> GroupMember:
        m = GroupMember(
            "epochlog", bootstrap, group, topic, name, **{"partition.assignment.strategy": strategy}
        )
        everyone.append(m)
        m.start()
        return m

    try:
        produce(bootstrap, topic, 10, phase=1)
        a = member("a")
        wait_for(lambda: len(a.assigned) == PARTITIONS, "a to own every partition", everyone)
        wait_for(lambda: len(distinct(everyone)) >= 60, "a to read phase 1", everyone)

        b, c = member("b"), member("c")
        wait_for(lambda: spread([a, b, c]) == [2, 2, 2], "a rebalance on join", everyone)
        assert set().union(*(m.assigned for m in (a, b, c))) == set(range(PARTITIONS))
        produce(bootstrap, topic, 10, phase=2)
        wait_for(lambda: len(distinct(everyone)) >= 120, "phase 2 read", everyone)

        c.stop()
        wait_for(lambda: spread([a, b]) == [3, 3], "a rebalance on leave", everyone)
        produce(bootstrap, topic, 10, phase=3)
        wait_for(lambda: len(distinct(everyone)) >= 180, "phase 3 read", everyone)
        a.stop()
        b.stop()

        # Every record was read; every commit came back with the epoch of its records.
        assert distinct(everyone) == {(p, o) for p in range(PARTITIONS) for o in range(30)}
        assert all(epoch == 0 for m in everyone for _, _, epoch in m.consumed)
        expected = {TopicPartition(topic, p): OffsetAndEpoch(30, 0) for p in range(PARTITIONS)}
        assert committed(bootstrap, group, topic) == expected

        # A restarted group resumes at the committed positions: only new records.
        before = total(everyone)
        restarted = [member(n) for n in ("a2", "b2", "c2")]
        wait_for(lambda: spread(restarted) == [2, 2, 2], "the restarted group", everyone)
        produce(bootstrap, topic, 5, phase=4)
        wait_for(lambda: total(restarted) >= 30, "phase 4 read", everyone)
        for m in restarted:
            m.stop()
        again = [(p, o) for m in restarted for p, o, _ in m.consumed]
        assert sorted(again) == [(p, o) for p in range(PARTITIONS) for o in range(30, 35)]
        assert total(everyone) == before + 30
    finally:
        stop_all(everyone)


@pytest.mark.interop
@pytest.mark.parametrize("other", ["kafka-python", "confluent"])
def test_mixed_group_with_other_clients(broker_factory, other: str) -> None:
    broker = broker_factory(SETTINGS)
    bootstrap = broker.bootstrap
    topic, group = f"groups-mixed-{other}", f"group-mixed-{other}"
    create_topic(bootstrap, topic, PARTITIONS)
    produce(bootstrap, topic, 10, phase=1)
    members = [
        GroupMember("epochlog", bootstrap, group, topic, "el-1"),
        GroupMember(other, bootstrap, group, topic, "other-1"),
        GroupMember("epochlog", bootstrap, group, topic, "el-2"),
    ]
    try:
        for m in members:
            m.start()
        wait_for(lambda: spread(members) == [2, 2, 2], "a 2/2/2 mixed group", members)
        owned = [p for m in members for p in m.assigned]
        assert sorted(owned) == list(range(PARTITIONS))
        produce(bootstrap, topic, 10, phase=2)
        wait_for(lambda: len(distinct(members)) >= 120, "every record read", members)
        for m in members:
            m.stop()
        assert distinct(members) == {(p, o) for p in range(PARTITIONS) for o in range(20)}
        assert sum(counted(members).values()) >= 120
        found = committed(bootstrap, group, topic)
        assert found == {TopicPartition(topic, p): OffsetAndEpoch(20, 0) for p in range(PARTITIONS)}
    finally:
        stop_all(members)


# -- membership on an in-process broker ------------------------------------------------

INPROCESS_SETTINGS = {k: str(v) for k, v in SETTINGS.items()}


def member_of(broker: Any, name: str, **conf: Any) -> Any:
    from epochlog.client import AsyncConsumer

    return AsyncConsumer(
        {
            "bootstrap.servers": f"127.0.0.1:{broker.port}",
            "group.id": "g",
            "client.id": name,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "heartbeat.interval.ms": 100,
            "session.timeout.ms": 10000,
            "retry.backoff.ms": 20,
            **conf,
        },
        broker.seams,
    )


async def poll_until(condition: Callable[[], bool], *consumers: Any) -> None:
    """Each consumer polls on its own task (as an application would: a JoinGroup
    blocks that member's poll) until ``condition`` holds; a hang guard bounds it."""
    import asyncio

    stop = asyncio.Event()

    async def keep_polling(c: Any) -> None:
        while not stop.is_set():
            await c.poll(100)

    tasks = [asyncio.ensure_future(keep_polling(c)) for c in consumers]
    try:
        deadline = time.monotonic() + HANG_GUARD_S
        while not condition():
            for t in tasks:
                if t.done():
                    t.result()  # a failed poll ends the wait with its error
            assert time.monotonic() < deadline, "condition not reached"
            await asyncio.sleep(0.02)
    finally:
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)


def test_unsubscribe_leaves_and_a_grown_topic_is_rebalanced(tmp_path: Any) -> None:
    from inprocess_broker import run, running_broker

    from epochlog.client.admin import AsyncAdmin

    async def scenario() -> None:
        async with running_broker(tmp_path, **INPROCESS_SETTINGS) as broker:
            admin = AsyncAdmin({"bootstrap.servers": f"127.0.0.1:{broker.port}"}, broker.seams)
            await admin.create_topic("t", partitions=2, replication_factor=1)
            a = member_of(broker, "a", **{"metadata.max.age.ms": 200})
            b = member_of(broker, "b", **{"metadata.max.age.ms": 200})
            a.subscribe(["t"])
            b.subscribe(["t"])
            await poll_until(lambda: len(a.assignment()) == len(b.assignment()) == 1, a, b)

            await admin.create_partitions("t", 4)  # both notice and rejoin
            await poll_until(lambda: len(a.assignment()) == len(b.assignment()) == 2, a, b)
            everything = sorted(a.assignment() + b.assignment())
            assert everything == [TopicPartition("t", p) for p in range(4)]

            await a.unsubscribe()
            assert a.assignment() == [] and a.subscription() == []
            await poll_until(lambda: len(b.assignment()) == 4, b)
            await a.close()
            await b.close()
            await admin.close()

    run(scenario)


def test_a_member_that_stops_polling_leaves_after_max_poll_interval(tmp_path: Any) -> None:
    from inprocess_broker import run, running_broker

    from epochlog.client.admin import AsyncAdmin

    async def scenario() -> None:
        async with running_broker(tmp_path, **INPROCESS_SETTINGS) as broker:
            admin = AsyncAdmin({"bootstrap.servers": f"127.0.0.1:{broker.port}"}, broker.seams)
            await admin.create_topic("t", partitions=2, replication_factor=1)
            slow = member_of(broker, "slow", **{"max.poll.interval.ms": 1500})
            live = member_of(broker, "live", **{"max.poll.interval.ms": 1500})
            slow.subscribe(["t"])
            live.subscribe(["t"])
            await poll_until(
                lambda: len(slow.assignment()) == len(live.assignment()) == 1, slow, live
            )
            # Only ``live`` polls now: ``slow``'s heartbeat task gives its partition up.
            await poll_until(lambda: len(live.assignment()) == 2, live)
            assert slow.subscription() == ["t"]
            # Out of the group, its commits are refused: the partition is live's now.
            with pytest.raises(CommitFailedError, match="UNKNOWN_MEMBER_ID"):
                await slow.commit({TopicPartition("t", 0): OffsetAndEpoch(0, 0)})
            # Polling again, ``slow`` rejoins and gets its share back.
            await poll_until(
                lambda: len(slow.assignment()) == len(live.assignment()) == 1, slow, live
            )
            await slow.close()
            await live.close()
            await admin.close()

    run(scenario)


def test_members_ride_out_a_coordinator_restart(broker_factory) -> None:
    """The coordinator's connection breaks and the broker comes back (its groups loaded
    again from __consumer_offsets): members find it again, rejoin if their membership
    is gone, and go on from the committed positions with nothing skipped."""
    broker = broker_factory(SETTINGS)
    bootstrap = broker.bootstrap
    topic, group = "groups-restart", "group-restart"
    create_topic(bootstrap, topic, PARTITIONS)
    produce(bootstrap, topic, 10, phase=1)
    members = [GroupMember("epochlog", bootstrap, group, topic, n) for n in ("r1", "r2")]
    try:
        for m in members:
            m.start()
        wait_for(lambda: spread(members) == [3, 3], "a 3/3 group", members)
        wait_for(lambda: len(distinct(members)) >= 60, "phase 1 read", members)
        broker.kill()
        broker.restart()
        produce(bootstrap, topic, 10, phase=2)
        wait_for(lambda: len(distinct(members)) >= 120, "phase 2 read after the restart", members)
        wait_for(lambda: spread(members) == [3, 3], "the group stable again", members)
        for m in members:
            m.stop()
        assert distinct(members) == {(p, o) for p in range(PARTITIONS) for o in range(20)}
        found = committed(bootstrap, group, topic)
        # Phase 2 was written at the epoch the restart brought: the broker came back as a
        # new incarnation (its broker epoch), so it led again only after an election
        # that left the partitions leaderless (epoch 1) and one that gave them back (2).
        assert found == {TopicPartition(topic, p): OffsetAndEpoch(20, 2) for p in range(PARTITIONS)}
    finally:
        stop_all(members)


def test_poll_returns_unjoined_while_no_broker_answers(broker_factory) -> None:
    import threading

    from epochlog.client import Consumer

    broker = broker_factory(SETTINGS)
    topic = "groups-down"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    produce(broker.bootstrap, topic, 5, phase=1)
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "group-down",
            "auto.offset.reset": "earliest",
            "request.timeout.ms": 2000,
            "retry.backoff.ms": 20,
        }
    )
    try:
        consumer.subscribe([topic])
        broker.kill()
        answers: list[Any] = []
        poller = threading.Thread(target=lambda: answers.append(consumer.poll(0.5)))
        poller.start()
        poller.join(HANG_GUARD_S)
        assert not poller.is_alive(), "poll did not return without a coordinator"
        assert list(answers[0]) == [] and consumer.assignment() == []

        broker.restart()
        got: list[Any] = []
        deadline = time.monotonic() + HANG_GUARD_S
        while len(got) < 5 * PARTITIONS and time.monotonic() < deadline:
            got.extend(consumer.poll(0.2))
        assert sorted((r.partition, r.offset) for r in got) == [
            (p, o) for p in range(PARTITIONS) for o in range(5)
        ]
        assert len(consumer.assignment()) == PARTITIONS
    finally:
        consumer.close()
