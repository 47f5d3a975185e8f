"""The client's own counts through the synchronous Producer and Consumer: records
acknowledged and handed out, and resets by the consumer's policy. Truncations detected
are checked where truncations are made (test_client_truncation)."""

from __future__ import annotations

from epochlog.client import Consumer, Producer
from support.broker import BrokerProcess
from support.clients import create_topic

COUNT = 10


def read_all(consumer: Consumer, count: int) -> int:
    got = 0
    for _ in range(200):
        got += len(consumer.poll(0.2))
        if got >= count:
            break
    return got


def test_producer_and_consumer_metrics(module_broker: BrokerProcess) -> None:
    create_topic(module_broker.bootstrap, "client-metrics")
    with Producer({"bootstrap.servers": module_broker.bootstrap}) as producer:
        assert producer.metrics() == {"record-send-total": 0, "record-error-total": 0}
        for i in range(COUNT):
            producer.produce("client-metrics", b"v%d" % i)
        assert producer.flush(60)
        assert producer.metrics() == {"record-send-total": COUNT, "record-error-total": 0}
    config = {"bootstrap.servers": module_broker.bootstrap, "auto.offset.reset": "earliest"}
    with Consumer(config) as sought:
        sought.assign([("client-metrics", 0)])
        sought.seek(("client-metrics", 0), 4)
        assert read_all(sought, COUNT - 4) == COUNT - 4
        assert sought.metrics() == {
            "records-consumed-total": COUNT - 4,
            "truncations-detected-total": 0,
            "offset-resets-earliest-total": 0,
        }
    with Consumer(config) as reset:
        reset.assign([("client-metrics", 0)])  # no position: the policy places it
        assert read_all(reset, COUNT) == COUNT
        assert reset.metrics() == {
            "records-consumed-total": COUNT,
            "truncations-detected-total": 0,
            "offset-resets-earliest-total": 1,
        }
