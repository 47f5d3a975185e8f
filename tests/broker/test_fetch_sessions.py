"""The fetch session cache's rules (KIP-227, Kafka's FetchSession.scala), without I/O."""

from __future__ import annotations

import random
import uuid
from typing import Any

import pytest

from epochlog.broker.fetch_sessions import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    CachedPartition,
    FetchContext,
    FetchSessionCache,
    next_epoch,
)
from epochlog.protocol.errors import ErrorCode, KafkaError
from epochlog.protocol.fetch_response import PartitionData

EVICTION_MS = 1000
TOPIC_ID = uuid.UUID(int=7)


class ManualClock:
    def __init__(self) -> None:
        self.now = 100.0

    def time_ms(self) -> int:
        return int(self.now * 1000)

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        raise AssertionError("the cache never waits")

    def timeout(self, seconds: float) -> Any:
        raise AssertionError("the cache never waits")


def cache(slots: int = 10) -> tuple[FetchSessionCache, ManualClock]:
    clock = ManualClock()
    return FetchSessionCache(slots, clock, random.Random(3), EVICTION_MS), clock


def asked(partition: int, offset: int = 0, topic: str = "t") -> CachedPartition:
    return CachedPartition(topic, TOPIC_ID, partition, offset, partition_max_bytes=1 << 20)


def data(partition: int, hw: int = 0, records: bool = False, error: int = 0) -> PartitionData:
    return PartitionData(
        partition,
        error,
        hw,
        hw,
        0,
        [b"x" * 70] if records else [],
    )


def answer(context: FetchContext, reads: dict[int, PartitionData], epoch: int = 0) -> Any:
    results = [(c, reads.get(c.partition, data(c.partition)), epoch) for c in context.partitions]
    return context.respond(results)


def open_session(
    sessions: FetchSessionCache, count: int, privileged: bool = False, ids: bool = True
) -> int:
    context = sessions.new_context(
        0,
        INITIAL_EPOCH,
        [asked(p) for p in range(count)],
        [],
        privileged=privileged,
        uses_topic_ids=ids,
    )
    session_id, answered = answer(context, {})
    assert len(answered) == count
    return session_id


def incremental(
    sessions: FetchSessionCache,
    session_id: int,
    epoch: int,
    parts: list[CachedPartition] | None = None,
    forgotten: list[Any] | None = None,
    ids: bool = True,
) -> FetchContext:
    return sessions.new_context(
        session_id, epoch, parts or [], forgotten or [], privileged=False, uses_topic_ids=ids
    )


def test_full_fetch_with_epoch_zero_creates_a_session_expecting_epoch_one() -> None:
    sessions, _ = cache()
    session_id = open_session(sessions, 3)
    assert session_id != 0
    session = sessions.get(session_id)
    assert session is not None and session.epoch == 1 and len(session.partitions) == 3


def test_full_fetch_with_final_epoch_answers_everything_without_a_session() -> None:
    sessions, _ = cache()
    context = sessions.new_context(
        0, FINAL_EPOCH, [asked(0), asked(1)], [], privileged=False, uses_topic_ids=True
    )
    session_id, answered = answer(context, {})
    assert session_id == 0 and len(answered) == 2 and len(sessions) == 0


def test_full_fetch_naming_a_session_closes_it() -> None:
    sessions, _ = cache()
    first = open_session(sessions, 2)
    context = sessions.new_context(
        first, FINAL_EPOCH, [asked(0)], [], privileged=False, uses_topic_ids=True
    )
    assert answer(context, {})[0] == 0
    assert sessions.get(first) is None and len(sessions) == 0


def test_incremental_answer_carries_only_partitions_with_news() -> None:
    sessions, _ = cache()
    session_id = open_session(sessions, 4)
    context = incremental(sessions, session_id, 1)
    assert len(context.partitions) == 4  # every session partition is read
    _, answered = answer(context, {1: data(1, hw=0, records=True), 2: data(2, hw=5)})
    assert sorted(c.partition for c, _ in answered) == [1, 2]
    # Nothing new: nothing answered; the same high watermark is not news twice.
    _, answered = answer(incremental(sessions, session_id, 2), {2: data(2, hw=5)})
    assert answered == []


def test_incremental_reports_errors_log_start_and_leader_epoch_changes() -> None:
    sessions, _ = cache()
    session_id = open_session(sessions, 3)
    reads = {0: data(0, error=ErrorCode.FENCED_LEADER_EPOCH), 1: data(1)}
    reads[1].log_start_offset = 4
    _, answered = answer(incremental(sessions, session_id, 1), reads)
    assert sorted(c.partition for c, _ in answered) == [0, 1]
    # The error is gone: the partition is answered again (its told HW was reset).
    _, answered = answer(incremental(sessions, session_id, 2), {1: reads[1]})
    assert [c.partition for c, _ in answered] == [0]
    # A new leader epoch is news even to a fetcher that sends none.
    _, answered = answer(incremental(sessions, session_id, 3), {1: reads[1]}, epoch=1)
    assert sorted(c.partition for c, _ in answered) == [0, 1, 2]


def test_incremental_request_adds_updates_and_forgets_partitions() -> None:
    sessions, _ = cache()
    session_id = open_session(sessions, 2)
    context = incremental(sessions, session_id, 1, [asked(1, offset=9), asked(5)], [(TOPIC_ID, 0)])
    by_partition = {c.partition: c for c in context.partitions}
    assert sorted(by_partition) == [1, 5]
    assert by_partition[1].fetch_offset == 9
    # The added partition is new to the fetcher: answered at once.
    _, answered = answer(context, {})
    assert [c.partition for c, _ in answered] == [5]


def test_partitions_with_data_move_to_the_end_of_the_session() -> None:
    sessions, _ = cache()
    session_id = open_session(sessions, 3)
    answer(incremental(sessions, session_id, 1), {0: data(0, records=True)})
    assert [c.partition for c in incremental(sessions, session_id, 2).partitions] == [1, 2, 0]


@pytest.mark.parametrize(
    ("session_epoch", "ids", "code"),
    [
        (5, True, ErrorCode.INVALID_FETCH_SESSION_EPOCH),
        (1, False, ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR),
    ],
)
def test_bad_epoch_or_topic_id_use_is_refused_and_the_session_is_untouched(
    session_epoch: int, ids: bool, code: ErrorCode
) -> None:
    sessions, _ = cache()
    session_id = open_session(sessions, 2)
    with pytest.raises(KafkaError) as refused:
        incremental(sessions, session_id, session_epoch, [asked(9)], [(TOPIC_ID, 0)], ids=ids)
    assert refused.value.code == code
    session = sessions.get(session_id)
    assert session is not None and session.epoch == 1 and len(session.partitions) == 2
    assert len(incremental(sessions, session_id, 1).partitions) == 2


def test_unknown_session_id_is_refused() -> None:
    sessions, _ = cache()
    other = open_session(sessions, 1)
    with pytest.raises(KafkaError) as refused:
        incremental(sessions, other + 1, 1)
    assert refused.value.code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert sessions.get(other) is not None


def test_epochs_wrap_to_one_and_final_stays_final() -> None:
    assert next_epoch(0) == 1 and next_epoch(41) == 42
    assert next_epoch((1 << 31) - 1) == 1
    assert next_epoch(FINAL_EPOCH) == FINAL_EPOCH


def test_zero_slots_never_create_a_session() -> None:
    sessions, _ = cache(slots=0)
    assert open_session(sessions, 2) == 0 and len(sessions) == 0


def test_full_cache_evicts_a_stale_session_first() -> None:
    sessions, clock = cache(slots=2)
    stale = open_session(sessions, 50, privileged=True)
    clock.now += 0.5
    fresh = open_session(sessions, 1)
    clock.now += 0.6  # stale unused for 1.1 s > eviction ms; fresh for 0.6 s
    newcomer = open_session(sessions, 1)
    assert newcomer != 0
    assert sessions.get(stale) is None and sessions.get(fresh) is not None


def test_young_sessions_are_safe_from_clients_but_not_from_followers() -> None:
    sessions, clock = cache(slots=1)
    consumer = open_session(sessions, 10)
    clock.now += 0.1
    assert open_session(sessions, 100) == 0  # a client cannot evict a young session
    follower = open_session(sessions, 1, privileged=True)
    assert follower != 0 and sessions.get(consumer) is None
    clock.now += 0.1
    # A young follower session is safe even from another follower.
    assert open_session(sessions, 5, privileged=True) == 0


def test_old_sessions_go_smallest_first_and_only_for_a_larger_one() -> None:
    sessions, clock = cache(slots=2)
    small = open_session(sessions, 2)
    large = open_session(sessions, 20)
    clock.now += 1.5
    for session_id, epoch in ((small, 1), (large, 1)):  # used: not stale, but old
        incremental(sessions, session_id, epoch)
    assert open_session(sessions, 2) == 0  # not worth more than the smallest
    third = open_session(sessions, 3)
    assert third != 0 and sessions.get(small) is None and sessions.get(large) is not None
