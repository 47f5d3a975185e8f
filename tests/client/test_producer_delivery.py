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
