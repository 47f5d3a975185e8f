"""The KIP-320 draft's reset table (seeds/000_82fc35d66e1520f0.txt), cell by cell, on a
real 3-broker cluster with two unclean leader elections that truncate the log below
what epochlog's consumers read.

The story (replicas [A, C] of every topic, unclean election allowed, the controller K
outside them): FIRST is written to both replicas; C is paused and leaves the ISR; LOST
is written to A alone; the "known" consumers read everything. A is killed and C, resumed,
is elected uncleanly (epoch e1): it takes NEW at the offsets LOST held. The "unknown"
consumers start from a committed-looking position inside NEW (offset 6, epoch e1) and
read to its end. C is killed and A, restarted, is elected uncleanly (epoch e2): it never
saw epoch e1, and its older epoch ends beyond the unknown consumers' position.

- Known divergence: first election, the new leader's epoch for the consumers' position
  ends at 5 (OffsetsForLeaderEpoch); second election, the leader never had epoch e1 and
  the consumer remembers it began reading e1 at 5. Both are 5, the first offset where
  what the consumer read differs from what the new leader holds.
- Unknown divergence: the leader never had e1, and the consumer, started inside e1 from
  a position, does not know where e1 began: it cannot place the divergence.

Every topic has its own consumer, so each log line names the cell it belongs to.
Topics "*-nots" carry no record timestamps (-1): ``closest`` has nothing to look up.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from clientcluster_support import (
    Held,
    LogLines,
    LoopConsumer,
    Roles,
    first_difference,
    keyed,
    produce,
    raised,
    read,
    wait_for,
)

from epochlog.client import (
    ConsumerRecord,
    LogTruncationError,
    NoOffsetForPartitionError,
    OffsetAndEpoch,
    OffsetOutOfRangeError,
    TopicPartition,
)

POLICIES = ("none", "earliest", "latest", "closest")
KNOWN = {p: f"known-{p}" for p in POLICIES}
UNKNOWN = {
    **{p: f"unknown-{p}" for p in POLICIES},
    "closest-nots": "unknown-closest-nots",
    "closest-late": "unknown-closest-late",
}
TOPICS = [*KNOWN.values(), *UNKNOWN.values()]
ELECTIONS = (1, 2)
BOUND_S = 120.0
# Retention runs often, for the "offset out of range (too low)" column.
CLUSTER_SETTINGS = {"log.retention.check.interval.ms": "500"}
CONSUMER = {"retry.backoff.ms": 50, "retry.backoff.max.ms": 500}


def tp_of(topic: str) -> TopicPartition:
    return TopicPartition(topic, 0)


def stamps(topic: str, offsets: list[int]) -> list[int]:
    """Record timestamps: -1 on the topics without timestamps."""
    return [-1 if topic.endswith("-nots") else t for t in offsets]


@dataclass
class Outcome:
    """What one consumer met at one election."""

    position: OffsetAndEpoch | None
    error: BaseException | None
    records: list[ConsumerRecord]
    lines: list[str]
    expected_divergence: int | None = None


@dataclass
class Story:
    base_ms: int
    epochs: dict[str, int] = field(default_factory=dict)
    outcomes: dict[tuple[str, int], Outcome] = field(default_factory=dict)
    held: dict[str, dict[int, Held]] = field(default_factory=dict)


def leader_everywhere(roles: Roles, via: int, leader: int, topics: list[str]) -> bool:
    try:
        return all(
            roles.cluster.metadata(t, via=via)["partitions"][0].leader == leader for t in topics
        )
    except (OSError, AssertionError):
        return False


def serves(roles: Roles, broker: int, topics: list[str]) -> bool:
    try:
        return all(roles.cluster.list_offsets(broker, t).error == 0 for t in topics)
    except OSError:
        return False


def settle(consumer: LoopConsumer, tp: TopicPartition, away_from: int) -> None:
    """Poll (expecting no records) until the position moved away from ``away_from``."""
    deadline = time.monotonic() + BOUND_S
    while time.monotonic() < deadline:
        assert consumer.poll(0.5) == []
        pos = consumer.position(tp)
        if pos is not None and pos.offset != away_from:
            return
    raise AssertionError(f"{tp}: position stayed at {away_from}")


@pytest.fixture(scope="module")
def story(roles: Roles) -> Iterator[Story]:
    cluster = roles.cluster
    # A is the broker the client asks first: while C is paused nobody waits on it.
    a, c, k = roles.first, roles.middle, roles.controller
    base = int(time.time() * 1000) - 60_000
    s = Story(base)
    first = [(b"first-%d" % i, b"v", base + i) for i in range(5)]
    lost = [(b"lost-%d" % i, b"v", base + 10 + i) for i in range(5)]
    new = [(b"new-%d" % i, b"v", base + t) for i, t in enumerate((5, 6, 12))]
    # On "*-late" topics the last record read is newer than anything A will hold.
    late = [(b"new-%d" % i, b"v", base + t) for i, t in enumerate((5, 6, 30))]
    after = [(b"after-0", b"v", base + 20)]

    def batch(topic: str, recs: list[tuple[bytes, bytes, int]]) -> list[tuple[bytes, bytes, int]]:
        times = stamps(topic, [r[2] for r in recs])
        return [(kk, v, ts) for (kk, v, _), ts in zip(recs, times, strict=True)]

    consumers: dict[str, LoopConsumer] = {}
    with LogLines() as lines:
        try:
            for topic in TOPICS:
                cluster.create_topic(
                    topic,
                    assignment=[[a, c]],
                    unclean_leader_election_enable="true",
                    min_insync_replicas="1",
                )
                assert produce(cluster.bootstrap, topic, batch(topic, first)) == list(range(5))
            for topic in TOPICS:
                wait_for(lambda t=topic: cluster.log_end_offset(c, t) == 5, 60, f"C holds {topic}")

            cluster.pause(c)
            wait_for(
                lambda: all(
                    c not in cluster.metadata(t, via=k)["partitions"][0].isr for t in TOPICS
                ),
                60,
                "the paused replica to leave the ISR",
            )
            for topic in TOPICS:
                assert produce(
                    f"127.0.0.1:{cluster.brokers[a].port}", topic, batch(topic, lost)
                ) == [5, 6, 7, 8, 9]

            # The known consumers read everything A holds.
            for policy, topic in KNOWN.items():
                consumer = consumers[topic] = LoopConsumer(
                    {
                        "bootstrap.servers": cluster.live_bootstrap(),
                        "auto.offset.reset": policy,
                        **CONSUMER,
                    }
                )
                consumer.assign([tp_of(topic)])
                consumer.seek(tp_of(topic), 0)
                got = read(consumer, 10)
                assert [r.key for r in got] == [r[0] for r in first + lost]
                s.epochs["first"] = got[0].leader_epoch
                s.epochs["lost"] = got[-1].leader_epoch
                assert consumer.position(tp_of(topic)) == OffsetAndEpoch(10, s.epochs["lost"])
            e_first, e_lost = s.epochs["first"], s.epochs["lost"]
            a_log = {i: Held(r[0], e_first) for i, r in enumerate(first)}
            a_log.update({5 + i: Held(r[0], e_lost) for i, r in enumerate(lost)})

            # First unclean election: C leads at e1 and takes NEW at 5..7.
            cluster.kill(a)
            cluster.resume(c)
            wait_for(lambda: leader_everywhere(roles, c, c, TOPICS), BOUND_S, "C elected uncleanly")
            wait_for(lambda: serves(roles, c, TOPICS), 60, "C to serve as leader")
            e1 = s.epochs["e1"] = cluster.metadata(TOPICS[0], via=c)["partitions"][0].leader_epoch
            assert e1 > e_lost
            for topic in TOPICS:
                written = late if topic.endswith("-late") else new
                assert produce(cluster.live_bootstrap(), topic, batch(topic, written)) == [5, 6, 7]
            c_log = {i: Held(r[0], e_first) for i, r in enumerate(first)}
            c_log.update({5 + i: Held(r[0], e1) for i, r in enumerate(new)})
            s.held = {"A": a_log, "C": c_log}

            for policy, topic in KNOWN.items():
                tp = tp_of(topic)
                consumer = consumers[topic]
                mark = len(lines.lines)
                position = consumer.position(tp)
                error = None
                if policy == "none":
                    error = raised(consumer, LogTruncationError, BOUND_S)
                    consumer.seek(tp, 5)  # the application goes on from the divergence
                got = read(consumer, 3)
                s.outcomes[(topic, 1)] = Outcome(
                    position,
                    error,
                    got,
                    [ln for ln in lines.lines[mark:] if ln.startswith(f"{tp}:")],
                    first_difference(a_log, c_log, 10),
                )

            # The unknown consumers start inside NEW from a position with its epoch.
            for policy, topic in UNKNOWN.items():
                consumer = consumers[topic] = LoopConsumer(
                    {
                        "bootstrap.servers": cluster.live_bootstrap(),
                        "auto.offset.reset": policy.split("-")[0],
                        **CONSUMER,
                    }
                )
                consumer.assign([tp_of(topic)])
                consumer.seek(tp_of(topic), 6, e1)
                assert [r.key for r in read(consumer, 2)] == [b"new-1", b"new-2"]
                assert consumer.position(tp_of(topic)) == OffsetAndEpoch(8, e1)

            # Second unclean election: C dies, A returns and leads at e2 without e1.
            cluster.kill(c)
            wait_for(
                lambda: leader_everywhere(roles, k, -1, TOPICS), BOUND_S, "the partitions offline"
            )
            cluster.brokers[a].restart()
            wait_for(lambda: leader_everywhere(roles, a, a, TOPICS), BOUND_S, "A elected uncleanly")
            wait_for(lambda: serves(roles, a, TOPICS), 60, "A to serve as leader")
            e2 = s.epochs["e2"] = cluster.metadata(TOPICS[0], via=a)["partitions"][0].leader_epoch
            assert e2 > e1

            for topic, consumer in consumers.items():
                tp = tp_of(topic)
                policy = topic.split("-", 1)[1]
                mark = len(lines.lines)
                position = consumer.position(tp)
                error = None
                if policy == "none":
                    error = raised(consumer, LogTruncationError, BOUND_S)
                    consumer.seek(tp, 5 if topic in KNOWN.values() else 0)
                    got = read(consumer, 5 if topic in KNOWN.values() else 10)
                elif topic in KNOWN.values():
                    got = read(consumer, 5)
                elif policy in ("latest", "closest-nots", "closest-late"):
                    settle(consumer, tp, 8)
                    assert produce(cluster.live_bootstrap(), topic, batch(topic, after)) == [10]
                    got = read(consumer, 1)
                elif policy == "earliest":
                    got = read(consumer, 10)
                else:  # closest, with timestamps
                    got = read(consumer, 3)
                view = {i: Held(r[0], e_first) for i, r in enumerate(first)}
                view.update({5 + i: Held(r[0], e1) for i, r in enumerate(new)})
                s.outcomes[(topic, 2)] = Outcome(
                    position,
                    error,
                    got,
                    [ln for ln in lines.lines[mark:] if ln.startswith(f"{tp}:")],
                    first_difference(view, a_log, 8) if topic in KNOWN.values() else None,
                )
            yield s
        finally:
            for consumer in consumers.values():
                consumer.close()


def known_expected(story: Story, election: int) -> list[tuple[int, bytes | None, int | None]]:
    """What a consumer reads from the divergence on: the new leader's records."""
    if election == 1:
        return [(5 + i, b"new-%d" % i, story.epochs["e1"]) for i in range(3)]
    return [(5 + i, b"lost-%d" % i, story.epochs["lost"]) for i in range(5)]


@pytest.mark.parametrize("election", ELECTIONS)
def test_none_with_known_divergence_raises_the_exact_offset(story: Story, election: int) -> None:
    tp = tp_of(KNOWN["none"])
    out = story.outcomes[(KNOWN["none"], election)]
    assert out.expected_divergence == 5
    position = 10 if election == 1 else 8
    assert out.position is not None and out.position.offset == position
    error = out.error
    assert isinstance(error, LogTruncationError)
    assert error.divergence == {tp: out.expected_divergence}
    assert error.offsets == {tp: position}
    assert f"{tp} (position {position}, divergence offset 5)" in str(error)
    # After the application's seek to the divergence: exactly the new leader's records.
    assert keyed(out.records) == known_expected(story, election)


@pytest.mark.parametrize("election", ELECTIONS)
@pytest.mark.parametrize("policy", ["earliest", "latest", "closest"])
def test_reset_policies_move_to_a_known_divergence(
    story: Story, policy: str, election: int
) -> None:
    topic = KNOWN[policy]
    tp = tp_of(topic)
    out = story.outcomes[(topic, election)]
    assert out.error is None
    assert out.expected_divergence == 5
    old = 10 if election == 1 else 8
    assert out.position is not None and out.position.offset == old
    assert keyed(out.records) == known_expected(story, election)
    moves = [ln for ln in out.lines if " -> " in ln]
    assert moves == [
        f"{tp}: position {old} -> 5, re-reads offsets 5..{old - 1} (log truncated, divergence at 5)"
    ], out.lines


@pytest.mark.parametrize("election", ELECTIONS)
def test_known_divergence_is_where_the_replicas_differ(story: Story, election: int) -> None:
    """The expected value itself, from what each replica held."""
    a_log, c_log = story.held["A"], story.held["C"]
    assert a_log[4] == c_log[4] and a_log[5] != c_log[5]
    # The model of each replica's log is what the consumers read from it as leader.
    from_a = story.outcomes[(UNKNOWN["earliest"], 2)].records
    assert {r.offset: Held(r.key, r.leader_epoch) for r in from_a} == a_log
    from_c = story.outcomes[(KNOWN["earliest"], 1)].records
    assert {r.offset: Held(r.key, r.leader_epoch) for r in from_c} == {
        o: h for o, h in c_log.items() if o >= 5
    }
    assert story.outcomes[(KNOWN["none"], election)].expected_divergence == 5


def test_none_with_unknown_divergence_raises_unknown(story: Story) -> None:
    tp = tp_of(UNKNOWN["none"])
    out = story.outcomes[(UNKNOWN["none"], 2)]
    error = out.error
    assert isinstance(error, LogTruncationError)
    assert error.divergence == {tp: None}
    assert error.offsets == {tp: 8}
    assert f"{tp} (position 8, divergence offset unknown)" in str(error)
    # No automatic move with policy none: the position stays until the application seeks.
    assert [ln for ln in out.lines if " -> " in ln] == [], out.lines
    # The application seeks to the start and reads exactly what A holds.
    e_first, e_lost = story.epochs["first"], story.epochs["lost"]
    assert keyed(out.records) == [(i, b"first-%d" % i, e_first) for i in range(5)] + [
        (5 + i, b"lost-%d" % i, e_lost) for i in range(5)
    ]


def unknown_move(story: Story, name: str) -> tuple[Outcome, list[str]]:
    out = story.outcomes[(UNKNOWN[name], 2)]
    assert out.error is None
    assert out.position == OffsetAndEpoch(8, story.epochs["e1"])
    return out, [ln for ln in out.lines if " -> " in ln]


def test_earliest_with_unknown_divergence_goes_to_the_log_start(story: Story) -> None:
    out, moves = unknown_move(story, "earliest")
    tp = tp_of(UNKNOWN["earliest"])
    assert moves == [
        f"{tp}: position 8 -> 0, re-reads offsets 0..7 "
        "(truncation at an unknown offset: reset to the log start offset)"
    ], out.lines
    e_first, e_lost = story.epochs["first"], story.epochs["lost"]
    assert keyed(out.records) == [(i, b"first-%d" % i, e_first) for i in range(5)] + [
        (5 + i, b"lost-%d" % i, e_lost) for i in range(5)
    ]


def test_latest_with_unknown_divergence_goes_to_the_log_end(story: Story) -> None:
    out, moves = unknown_move(story, "latest")
    tp = tp_of(UNKNOWN["latest"])
    assert moves == [
        f"{tp}: position 8 -> 10, skips offsets 8..9 "
        "(truncation at an unknown offset: reset to the log end offset)"
    ], out.lines
    assert keyed(out.records) == [(10, b"after-0", story.epochs["e2"])]


def test_closest_with_unknown_divergence_uses_the_last_record_timestamp(story: Story) -> None:
    """The last record read (new-2) has timestamp base+12; on A the first record at or
    after it is lost-2 (base+12), at offset 7."""
    out, moves = unknown_move(story, "closest")
    tp = tp_of(UNKNOWN["closest"])
    assert moves == [
        f"{tp}: position 8 -> 7, re-reads offsets 7..7 (truncation at an unknown offset: "
        "reset to the offset for the timestamp of the last consumed record)"
    ], out.lines
    e_lost = story.epochs["lost"]
    assert keyed(out.records) == [(5 + i, b"lost-%d" % i, e_lost) for i in (2, 3, 4)]
    assert [r.timestamp for r in out.records] == [story.base_ms + 10 + i for i in (2, 3, 4)]


def test_closest_with_unknown_divergence_and_no_timestamps_goes_to_the_log_end(
    story: Story,
) -> None:
    out, moves = unknown_move(story, "closest-nots")
    tp = tp_of(UNKNOWN["closest-nots"])
    assert moves == [
        f"{tp}: position 8 -> 10, skips offsets 8..9 "
        "(truncation at an unknown offset: reset to the log end offset)"
    ], out.lines
    assert keyed(out.records) == [(10, b"after-0", story.epochs["e2"])]
    assert [r.timestamp for r in out.records] == [-1]


@pytest.mark.parametrize("policy", POLICIES)
def test_initialization_column(roles: Roles, policy: str) -> None:
    """No position yet: earliest and closest start at the log start, latest at the log
    end, none raises NoOffsetForPartitionError; the start is logged."""
    cluster = roles.cluster
    topic = f"init-{policy}"
    cluster.create_topic(topic, assignment=[[roles.controller]])
    bootstrap = f"127.0.0.1:{cluster.brokers[roles.controller].port}"
    produce(bootstrap, topic, [(b"k%d" % i, b"v", int(time.time() * 1000)) for i in range(4)])
    tp = tp_of(topic)
    consumer = LoopConsumer(
        {"bootstrap.servers": bootstrap, "auto.offset.reset": policy, **CONSUMER}
    )
    try:
        with LogLines() as lines:
            consumer.assign([tp])
            if policy == "none":
                error = raised(consumer, NoOffsetForPartitionError, BOUND_S)
                assert error.partitions == [tp]
                return
            if policy == "latest":
                settle(consumer, tp, -1)
                produce(bootstrap, topic, [(b"late", b"v", int(time.time() * 1000))])
                assert [(r.offset, r.key) for r in read(consumer, 1)] == [(4, b"late")]
                target, where = 4, "log end offset"
            else:
                assert [r.offset for r in read(consumer, 4)] == [0, 1, 2, 3]
                target, where = 0, "log start offset"
            assert f"{tp}: position set to {target} (initialization: reset to the {where})" in (
                lines.about(tp)
            ), lines.lines
    finally:
        consumer.close()


@pytest.mark.parametrize("policy", POLICIES)
def test_out_of_range_too_low_column(roles: Roles, policy: str) -> None:
    """Retention moved the log start above the position: earliest and closest go to
    the log start, latest to the log end (each move logged with the skipped range),
    none raises OffsetOutOfRangeError with the position."""
    cluster = roles.cluster
    k = roles.controller
    topic = f"low-{policy}"
    tp = tp_of(topic)
    # One batch per segment; retention keeps about three of them.
    cluster.create_topic(topic, assignment=[[k]], segment_bytes="150", retention_bytes="350")
    for i in range(10):
        assert cluster.produce(k, topic, [(b"k%d" % i, b"v" * 60)]) == (0, i)
    wait_for(
        lambda: cluster.list_offsets(k, topic, timestamp=-2).offset > 0, 60, "retention to run"
    )
    start = cluster.list_offsets(k, topic, timestamp=-2).offset
    end = cluster.log_end_offset(k, topic)
    assert end == 10 and start > 0
    bootstrap = f"127.0.0.1:{cluster.brokers[k].port}"
    consumer = LoopConsumer(
        {"bootstrap.servers": bootstrap, "auto.offset.reset": policy, **CONSUMER}
    )
    try:
        with LogLines() as lines:
            consumer.assign([tp])
            consumer.seek(tp, 0)
            if policy == "none":
                error = raised(consumer, OffsetOutOfRangeError, BOUND_S)
                assert not isinstance(error, LogTruncationError)
                assert error.offsets == {tp: 0}
                return
            if policy == "latest":
                settle(consumer, tp, 0)
                assert cluster.produce(k, topic, [(b"late", b"v")]) == (0, 10)
                assert [(r.offset, r.key) for r in read(consumer, 1)] == [(10, b"late")]
                move = f"{tp}: position 0 -> 10, skips offsets 0..9 "
                where = "log end offset"
            else:
                got = read(consumer, end - start)
                assert [(r.offset, r.key) for r in got] == [
                    (i, b"k%d" % i) for i in range(start, end)
                ]
                move = f"{tp}: position 0 -> {start}, skips offsets 0..{start - 1} "
                where = "log start offset"
            moves = [ln for ln in lines.about(tp) if " -> " in ln]
            assert moves == [move + f"(offset out of range (too low): reset to the {where})"], (
                lines.lines
            )
    finally:
        consumer.close()


def test_closest_with_unknown_divergence_and_no_later_record_goes_to_the_log_end(
    story: Story,
) -> None:
    """The last record read (base+30) is newer than every record A holds: the lookup
    by timestamp finds nothing, so closest falls back to the log end."""
    out, moves = unknown_move(story, "closest-late")
    tp = tp_of(UNKNOWN["closest-late"])
    assert moves == [
        f"{tp}: position 8 -> 10, skips offsets 8..9 "
        "(truncation at an unknown offset: reset to the log end offset)"
    ], out.lines
    assert keyed(out.records) == [(10, b"after-0", story.epochs["e2"])]
