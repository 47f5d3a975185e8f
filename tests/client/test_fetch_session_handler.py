"""The fetcher's side of a fetch session (KIP-227): what each request lists and forgets,
and how failures fall back to a full fetch."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

from epochlog.client.fetch_session import FetchSessionHandler, PartitionFetch, fetch_request
from epochlog.protocol.errors import ErrorCode

TOPIC_ID = uuid.UUID(int=5)


def part(partition: int, offset: int = 0, epoch: int = 0) -> PartitionFetch:
    return PartitionFetch("t", TOPIC_ID, partition, offset, epoch, -1, -1, 1 << 20)


def answer(session_id: int = 77, error: int = 0) -> SimpleNamespace:
    return SimpleNamespace(error_code=error, session_id=session_id, responses=[])


def started(count: int = 3) -> FetchSessionHandler:
    handler = FetchSessionHandler()
    plan = handler.plan([part(p) for p in range(count)], uses_topic_ids=True)
    assert (plan.session_id, plan.epoch, len(plan.send)) == (0, 0, count)
    assert handler.answered(plan, answer())
    return handler


def test_incremental_request_lists_changed_partitions_and_forgets_dropped_ones() -> None:
    handler = started()
    plan = handler.plan([part(0), part(1, offset=5)], uses_topic_ids=True)
    assert (plan.session_id, plan.epoch) == (77, 1)
    assert [p.partition for p in plan.send] == [1]
    assert [p.partition for p in plan.forget] == [2]
    request = fetch_request(
        plan, replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1, isolation_level=0
    )
    assert request.forgotten_topics_data[0].partitions == [2]
    assert handler.answered(plan, answer())
    # A new leader epoch is a change too.
    again = handler.plan([part(0, epoch=1), part(1, offset=5)], uses_topic_ids=True)
    assert again.epoch == 2 and [p.partition for p in again.send] == [0]


def test_a_refused_session_falls_back_to_a_full_fetch() -> None:
    handler = started()
    plan = handler.plan([part(0)], uses_topic_ids=True)
    assert not handler.answered(plan, answer(0, ErrorCode.INVALID_FETCH_SESSION_EPOCH))
    retry = handler.plan([part(0)], uses_topic_ids=True)
    # Full, naming the old session so the broker closes it.
    assert (retry.session_id, retry.epoch, len(retry.send)) == (77, 0, 1)
    assert not handler.answered(retry, answer(0, ErrorCode.FETCH_SESSION_ID_NOT_FOUND))
    assert handler.plan([part(0)], uses_topic_ids=True).session_id == 0


def test_lost_answer_or_switch_to_topic_names_starts_over_in_full() -> None:
    handler = started()
    handler.failed()
    assert handler.plan([part(0)], uses_topic_ids=True).epoch == 0
    handler = started()
    by_name = handler.plan([part(0)], uses_topic_ids=False)
    assert (by_name.epoch, len(by_name.send)) == (0, 1)


def test_a_broker_without_slots_gets_full_fetches() -> None:
    handler = FetchSessionHandler()
    for _ in range(2):
        plan = handler.plan([part(0), part(1)], uses_topic_ids=True)
        assert (plan.session_id, plan.epoch, len(plan.send)) == (0, 0, 2)
        assert handler.answered(plan, answer(session_id=0))
