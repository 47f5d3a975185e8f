"""Groups of three real consumers (confluent-kafka and kafka-python) on a 6-partition
topic of a real broker process: rebalances on join and leave, and after every member
restarts, consumption resumes from the committed positions with no gap."""

from __future__ import annotations

import logging

import pytest

from support.clients import create_topic
from support.member_threads import (
    PARTITIONS,
    GroupMember,
    counted,
    distinct,
    offset_fetch,
    produce,
    spread,
    total,
    wait_for,
)

SETTINGS = {
    "offsets.topic.num.partitions": 5,
    "offsets.topic.replication.factor": 1,
    "group.initial.rebalance.delay.ms": 0,
}


@pytest.mark.interop
@pytest.mark.parametrize("kind", ["confluent", "kafka-python"])
def test_three_members_rebalance_and_resume_from_committed_positions(
    broker_factory, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    # kafka-python's group steps, in the report of a failure.
    caplog.set_level(logging.INFO, logger="kafka.coordinator")
    broker = broker_factory(SETTINGS)
    topic, group = f"groups-{kind}", f"group-{kind}"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    everyone: list[GroupMember] = []

    def member(name: str) -> GroupMember:
        m = GroupMember(kind, broker.bootstrap, group, topic, name, commit_each_record=True)
        everyone.append(m)
        m.start()
        return m

    produce(broker.bootstrap, topic, 10, phase=1, client="confluent")
    a = member("a")
    wait_for(lambda: len(a.assigned) == PARTITIONS, "a to own every partition", everyone)
    wait_for(lambda: total(everyone) >= 60, "a to read phase 1", everyone)

    b, c = member("b"), member("c")
    wait_for(lambda: spread([a, b, c]) == [2, 2, 2], "a rebalance on join to 2/2/2", everyone)
    produce(broker.bootstrap, topic, 10, phase=2, client="confluent")
    wait_for(lambda: len(distinct(everyone)) >= 120, "phase 2 read", everyone)

    c.stop()
    wait_for(lambda: spread([a, b]) == [3, 3], "a rebalance on leave to 3/3", everyone)
    produce(broker.bootstrap, topic, 10, phase=3, client="confluent")
    wait_for(lambda: len(distinct(everyone)) >= 180, "phase 3 read", everyone)
    a.stop()
    b.stop()

    before = offset_fetch(broker.port, group)
    assert sorted(before) == list(range(PARTITIONS))
    assert all(offset == 30 for offset, _ in before.values()), before
    # The committed leader epoch comes back through OffsetFetch v5+ (and v8).
    assert {epoch for _, epoch in before.values()} == {0}
    assert offset_fetch(broker.port, group, version=5) == before

    produce(broker.bootstrap, topic, 10, phase=4, client="confluent")
    restarted = [member(name) for name in ("a2", "b2", "c2")]
    wait_for(lambda: spread(restarted) == [2, 2, 2], "the restarted group to settle", everyone)
    wait_for(
        lambda: len(distinct(everyone)) >= 240,
        "phase 4 read after restart",
        everyone,
    )
    for m in restarted:
        m.stop()

    # Resumed exactly at the committed positions: nothing before them read again.
    after = counted(restarted)
    for partition, (offset, _) in before.items():
        first = min(o for p, o in after if p == partition)
        assert first == offset, f"partition {partition} resumed at {first}, committed {offset}"
    # No gap anywhere, and a record is read twice only in the one-record uncommitted
    # window at a change of owner.
    seen = counted(everyone)
    for partition in range(PARTITIONS):
        assert {o for p, o in seen if p == partition} == set(range(40))
    duplicates = sum(n - 1 for n in seen.values())
    assert duplicates <= 2 * PARTITIONS, f"{duplicates} records read twice"
    assert offset_fetch(broker.port, group) == {p: (40, 0) for p in range(PARTITIONS)}
