"""The sync Producer's per-record future: concurrent.futures' interface on a shared
condition; the delivery callback runs once; the queue's room is given back on answer."""

from __future__ import annotations

import threading

import pytest

from epochlog.client.delivery import Deliveries, DeliveryFuture


def test_result_waits_for_an_answer_from_another_thread() -> None:
    deliveries = Deliveries(limit=10)
    deliveries.take_room(1)
    seen: list[tuple[BaseException | None, object]] = []
    future: DeliveryFuture[str] = DeliveryFuture(deliveries, 1, lambda e, v: seen.append((e, v)))
    assert not future.done()
    with pytest.raises(TimeoutError):
        future.result(0.01)
    threading.Timer(0.05, future.set_result, ["meta"]).start()
    assert future.result(10) == "meta" and future.exception() is None
    future.set_exception(RuntimeError("late"))  # a second answer changes nothing
    assert seen == [(None, "meta")] and future.result() == "meta"
    assert deliveries.unanswered == 0


def test_a_failure_reaches_the_callback_the_result_and_done_callbacks() -> None:
    deliveries = Deliveries(limit=10)
    deliveries.take_room(3)
    error = RuntimeError("not delivered")
    seen: list[BaseException | None] = []
    future: DeliveryFuture[str] = DeliveryFuture(deliveries, 3, lambda e, v: seen.append(e))
    then: list[object] = []
    future.add_done_callback(then.append)
    future.set_exception(error)
    future.add_done_callback(then.append)  # after the answer: called at once
    assert seen == [error] and then == [future, future]
    with pytest.raises(RuntimeError, match="not delivered"):
        future.result()
    assert future.exception() is error and deliveries.unanswered == 0


def test_a_full_queue_refuses_until_records_are_answered() -> None:
    deliveries = Deliveries(limit=2)
    deliveries.take_room(2)
    with pytest.raises(BufferError, match="queue.buffering.max.messages=2"):
        deliveries.take_room(1)
    DeliveryFuture(deliveries, 1).set_result(None)
    deliveries.take_room(1)
    assert deliveries.unanswered == 2


def test_a_failing_callback_does_not_stop_the_answer() -> None:
    deliveries = Deliveries(limit=1)
    deliveries.take_room(1)

    def broken(error: BaseException | None, value: object) -> None:
        raise ValueError("bug in user code")

    future: DeliveryFuture[int] = DeliveryFuture(deliveries, 1, broken)
    future.set_result(7)
    assert future.result() == 7 and deliveries.unanswered == 0
