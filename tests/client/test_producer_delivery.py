"""The sync Producer as Kafka's users expect it, against real broker processes: a record
for a topic that does not exist yet is auto-created where the broker allows it (and
fails with UNKNOWN_TOPIC_OR_PARTITION after delivery.timeout.ms where it does not);
``flush(timeout)`` returns by its timeout whatever is pending; every accepted record
ends in exactly one delivery callback, also with the broker stopped; a full queue
refuses records with BufferError instead of growing without bound."""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

import pytest

from epochlog.client import Consumer, DeliveryError, Producer, TopicPartition
from epochlog.protocol.errors import ErrorCode


class Deliveries:
    """Delivery callbacks by record value, to show each record was answered once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls: Counter[bytes] = Counter()
        self.errors: dict[bytes, BaseException] = {}

    def callback(self, value: bytes) -> Any:
        def answered(error: BaseException | None, meta: Any) -> None:
            with self._lock:
                self.calls[value] += 1
                if error is not None:
                    self.errors[value] = error

        return answered


def produce_all(producer: Producer, topic: str, values: list[bytes], seen: Deliveries) -> None:
    for v in values:
        producer.produce(topic, v, on_delivery=seen.callback(v))


def test_records_for_a_missing_topic_auto_create_it(broker_factory: Any) -> None:
    broker = broker_factory({"auto.create.topics.enable": "true", "num.partitions": "2"})
    values = [b"auto-%d" % i for i in range(200)]
    seen = Deliveries()
    with Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 1}) as producer:
        produce_all(producer, "made-by-produce", values, seen)
        assert producer.flush(60)
    assert seen.calls == Counter({v: 1 for v in values}) and not seen.errors
    with Consumer(
        {"bootstrap.servers": broker.bootstrap, "auto.offset.reset": "earliest"}
    ) as consumer:
        consumer.assign([TopicPartition("made-by-produce", p) for p in range(2)])
        got: list[bytes] = []
        for _ in range(100):
            got += [r.value for r in consumer.poll(0.2)]
            if len(got) >= len(values):
                break
    assert sorted(got) == sorted(values)


def test_a_missing_topic_the_broker_will_not_create_fails_each_record_once(
    broker_factory: Any,
) -> None:
    broker = broker_factory({"auto.create.topics.enable": "false"})
    values = [b"lost-%d" % i for i in range(300)]
    seen = Deliveries()
    config = {"bootstrap.servers": broker.bootstrap, "delivery.timeout.ms": 3000}
    with Producer(config) as producer:
        produce_all(producer, "never-created", values, seen)
        # Answered within the delivery timeout: flush(60) must not wait 300 times it.
        started = time.monotonic()
        assert producer.flush(60)
        assert time.monotonic() - started < 60
    assert seen.calls == Counter({v: 1 for v in values})
    codes = {getattr(e, "code", None) for e in seen.errors.values()}
    assert codes == {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert all(isinstance(e, DeliveryError) for e in seen.errors.values())
    assert "never-created" in str(next(iter(seen.errors.values())))


def test_flush_returns_by_its_timeout_and_every_record_is_answered_later(
    broker_factory: Any,
) -> None:
    broker = broker_factory()
    seen = Deliveries()
    values = [b"stopped-%d" % i for i in range(500)]
    config = {"bootstrap.servers": broker.bootstrap, "delivery.timeout.ms": 6000}
    with Producer(config) as producer:
        producer.produce("warm", b"up", on_delivery=seen.callback(b"up"))
        assert producer.flush(30)  # the topic is auto-created; the producer has its id
        broker.stop()
        produce_all(producer, "warm", values, seen)
        started = time.monotonic()
        assert producer.flush(1) is False
        assert time.monotonic() - started < 5  # by its own timeout, give or take a poll
        assert producer.flush(60)  # delivery.timeout.ms answers the rest
    assert seen.calls == Counter({b"up": 1, **{v: 1 for v in values}})
    assert set(seen.errors) == set(values)


def test_a_full_queue_refuses_with_buffer_error_and_answers_what_it_took(
    broker_factory: Any,
) -> None:
    broker = broker_factory()
    seen = Deliveries()
    config = {
        "bootstrap.servers": broker.bootstrap,
        "queue.buffering.max.messages": 50,
        "linger.ms": 1000,  # records stay queued while the test fills the queue
    }
    accepted: list[bytes] = []
    with Producer(config) as producer:
        with pytest.raises(BufferError, match=r"queue.buffering.max.messages=50"):
            for i in range(51):
                value = b"q-%d" % i
                producer.produce("queued", value, on_delivery=seen.callback(value))
                accepted.append(value)
        assert len(accepted) == 50
        assert producer.flush(30)
        producer.produce("queued", b"after", on_delivery=seen.callback(b"after"))
        assert producer.flush(30)
    assert seen.calls == Counter({v: 1 for v in [*accepted, b"after"]}) and not seen.errors


def test_a_full_queue_counts_send_and_produce_batch_records_once(broker_factory: Any) -> None:
    """produce() checks for room without a lock, counting entries still in the hand-off
    list; records of send() and produce_batch() sitting there are counted once, so the
    queue takes exactly its limit, whether or not the drain has moved them yet."""
    broker = broker_factory()
    seen = Deliveries()
    config = {
        "bootstrap.servers": broker.bootstrap,
        "queue.buffering.max.messages": 50,
        "linger.ms": 1000,
    }
    with Producer(config) as producer:
        batch = producer.produce_batch("mixed", [b"b-%d" % i for i in range(10)])
        sent = [producer.send("mixed", b"s-%d" % i) for i in range(5)]
        values = [b"p-%d" % i for i in range(35)]
        produce_all(producer, "mixed", values, seen)
        with pytest.raises(BufferError, match=r"queue full: 50 records"):
            producer.produce("mixed", b"one too many", on_delivery=seen.callback(b"x"))
        assert producer.flush(30)
        assert len(batch.result(30)) == 10 and all(f.result(30).offset >= 0 for f in sent)
    assert seen.calls == Counter({v: 1 for v in values}) and not seen.errors


def test_threads_producing_at_once_lose_no_record_and_keep_each_threads_order(
    broker_factory: Any,
) -> None:
    """The hand-off to the loop thread takes no lock while a drain runs: four threads
    producing in bursts, with flushes between, while drains start and stop under them.
    Every record is answered once and each thread's records keep their order."""
    broker = broker_factory()
    seen = Deliveries()
    per_thread = 3000
    flushed: list[bool] = []
    with Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0}) as producer:

        def run(t: int) -> None:
            for i in range(per_thread):
                value = b"t%d-%05d" % (t, i)
                producer.produce("handoff", value, partition=0, on_delivery=seen.callback(value))
                if i % 500 == 499:
                    flushed.append(producer.flush(30))
                elif i % 7 == 0:
                    time.sleep(0)  # let the drain catch up and stop now and then

        threads = [threading.Thread(target=run, args=(t,)) for t in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert producer.flush(30)
    # Each thread's flushes succeed while the others produce: the producer went idle
    # once (its records answered) even if another thread's record made it busy again
    # before the flush looked (a flush returned False at once, in 5 of 12 runs).
    assert flushed == [True] * 4 * (per_thread // 500)
    assert seen.calls == Counter(
        {b"t%d-%05d" % (t, i): 1 for t in range(4) for i in range(per_thread)}
    )
    assert not seen.errors
    with Consumer({"bootstrap.servers": broker.bootstrap, "auto.offset.reset": "earliest"}) as c:
        c.assign([TopicPartition("handoff", 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < 4 * per_thread and time.monotonic() < deadline:
            got.extend(r.value for r in c.poll(1.0))
    for t in range(4):
        mine = [v for v in got if v.startswith(b"t%d-" % t)]
        assert mine == sorted(mine) and len(mine) == per_thread


def test_a_record_handed_over_just_as_the_drain_stops_is_still_sent(
    broker_factory: Any,
) -> None:
    """The race the lock-free hand-off must survive, made to happen: another thread's
    ``produce`` lands right after the drain's last look at an empty queue (played here
    on the loop thread, at that moment). Either the drain sees the record or the
    ``produce`` starts a new drain; the record must not sit in the queue unsent."""
    broker = broker_factory()
    seen = Deliveries()
    with Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0}) as producer:
        producer.produce("race", b"first", on_delivery=seen.callback(b"first"))
        assert producer.flush(30)
        main = threading.current_thread()
        armed = [0]

        class RacingQueue(list):  # type: ignore[type-arg]
            def __bool__(self) -> bool:
                empty = len(self) == 0
                if empty and armed[0] and threading.current_thread() is not main:
                    armed[0] += 1
                    if armed[0] == 3:  # the drain's second look, after its loop ended
                        producer.produce("race", b"late", on_delivery=seen.callback(b"late"))
                return not empty

        producer._queue = RacingQueue(producer._queue)
        armed[0] = 1
        producer.produce("race", b"trigger", on_delivery=seen.callback(b"trigger"))
        deadline = time.monotonic() + 30
        while seen.calls[b"late"] == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert producer.flush(30)
    assert seen.calls == Counter({b"first": 1, b"trigger": 1, b"late": 1}) and not seen.errors
