"""The sync Producer's ``produce`` (runs of calls enqueued as one send_many, callbacks
called in one loop): every record gets exactly one callback, in call order, with its
offset or its error; a callback that raises stops no other; ``send`` and
``produce_batch`` between ``produce`` calls keep their place; keys still pick
partitions; and the records arrive in order, each once (idempotence on)."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import pytest

from epochlog.client import Consumer, Producer, TopicPartition
from epochlog.client.producer import RecordMetadata
from support.broker import BrokerProcess
from support.clients import create_topic

BOUND_S = 60


def read_values(bootstrap: str, topic: str, partition: int, count: int) -> list[bytes]:
    conf = {"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"}
    consumer = Consumer(conf)
    consumer.assign([TopicPartition(topic, partition)])
    got: list[bytes] = []
    for _ in range(200):
        got += [r.value for r in consumer.poll(0.2)]
        if len(got) >= count:
            break
    consumer.close()
    return got


def test_every_record_gets_one_callback_in_order_and_a_raising_one_stops_none(
    module_broker: BrokerProcess, caplog: pytest.LogCaptureFixture
) -> None:
    create_topic(module_broker.bootstrap, "runs", 1)
    seen: list[tuple[int, BaseException | None, RecordMetadata | None]] = []
    threads: set[str] = set()

    def on_delivery(i: int) -> Any:
        def delivered(error: BaseException | None, metadata: RecordMetadata | None) -> None:
            seen.append((i, error, metadata))
            threads.add(threading.current_thread().name)
            if i % 1000 == 7:
                raise RuntimeError("a callback's own bug")

        return delivered

    values = [b"v%05d" % i for i in range(20_000)]
    conf = {"bootstrap.servers": module_broker.bootstrap, "linger.ms": 5, "batch.size": 50_000}
    with caplog.at_level(logging.ERROR), Producer(conf) as producer:
        for i, value in enumerate(values):
            producer.produce("runs", value, partition=0, on_delivery=on_delivery(i))
        assert producer.flush(BOUND_S)
    assert [i for i, _, _ in seen] == list(range(len(values)))
    assert all(error is None for _, error, _ in seen)
    assert [m.offset for _, _, m in seen if m is not None] == list(range(len(values)))
    assert {(m.topic, m.partition) for _, _, m in seen if m is not None} == {("runs", 0)}
    assert threads == {"epochlog-producer"}
    failed = [r for r in caplog.records if "on_delivery callback failed" in r.getMessage()]
    assert len(failed) == 20
    assert read_values(module_broker.bootstrap, "runs", 0, len(values)) == values


@pytest.mark.parametrize(
    ("case", "topic_config", "producer_config"),
    [
        ("create time", {}, {}),
        ("log append time", {"message.timestamp.type": "LogAppendTime"}, {}),
        ("acks=0", {}, {"acks": 0, "enable.idempotence": False}),
    ],
)
def test_each_callback_gets_its_own_records_metadata(
    module_broker: BrokerProcess,
    case: str,
    topic_config: dict[str, str],
    producer_config: dict[str, object],
) -> None:
    """Offsets and timestamps as the batch's answer says: the record's own CreateTime
    or the broker's append time; offset -1 where acks=0 has no answer to give."""
    topic = "metadata-" + case.replace(" ", "-").replace("=", "")
    create_topic(module_broker.bootstrap, topic, 2, topic_config)
    seen: dict[int, RecordMetadata] = {}

    def on_delivery(i: int) -> Any:
        def delivered(error: BaseException | None, metadata: RecordMetadata | None) -> None:
            assert error is None and metadata is not None
            seen[i] = metadata

        return delivered

    count = 3_000
    stamps = [1_700_000_000_000 + 7 * i for i in range(count)]
    conf = {"bootstrap.servers": module_broker.bootstrap, "linger.ms": 5, **producer_config}
    started_ms = int(time.time() * 1000)
    with Producer(conf) as producer:
        # The topic's metadata known first: the calls then go as runs (send_many), not
        # one by one as they wait for it.
        producer.produce(topic, b"first", partition=0, timestamp=stamps[0] - 1)
        assert producer.flush(BOUND_S)
        for i in range(count):
            producer.produce(
                topic, b"v", partition=i % 2, timestamp=stamps[i], on_delivery=on_delivery(i)
            )
        assert producer.flush(BOUND_S)
    assert sorted(seen) == list(range(count))
    assert {(m.topic, m.partition) for i, m in seen.items() if i % 2} == {(topic, 1)}
    offsets = [seen[i].offset for i in range(count)]
    if case == "acks=0":
        assert set(offsets) == {-1}
    else:
        assert offsets[0::2] == list(range(1, count // 2 + 1))  # after "first"
        assert offsets[1::2] == list(range(count // 2))
    if case == "log append time":
        assert all(started_ms - 1000 <= m.timestamp <= time.time() * 1000 for m in seen.values())
    else:
        assert [seen[i].timestamp for i in range(count)] == stamps


def test_send_and_produce_batch_between_produce_calls_keep_their_place(
    module_broker: BrokerProcess,
) -> None:
    create_topic(module_broker.bootstrap, "runs-mixed", 1)
    order: list[bytes] = []
    with Producer({"bootstrap.servers": module_broker.bootstrap}) as producer:
        for round_ in range(50):
            for i in range(3):
                value = b"p%d-%d" % (round_, i)
                producer.produce("runs-mixed", value, partition=0)
                order.append(value)
            value = b"s%d" % round_
            producer.send("runs-mixed", value, partition=0)
            order.append(value)
            batch = [b"b%d-%d" % (round_, i) for i in range(2)]
            producer.produce_batch("runs-mixed", batch, partition=0)
            order += batch
        assert producer.flush(BOUND_S)
    assert read_values(module_broker.bootstrap, "runs-mixed", 0, len(order)) == order


def test_records_that_change_shape_within_a_run_keep_every_field(
    module_broker: BrokerProcess,
) -> None:
    """A run is kept without key, partition, header or timestamp columns until a record
    needs one; the records before and after it keep their own fields (none, or theirs)."""
    topic = "runs-shapes"
    create_topic(module_broker.bootstrap, topic, 2)
    base_ms = 1_700_000_000_000
    shapes: list[dict[str, Any]] = []
    for i in range(6_000):
        shape: dict[str, Any] = {"partition": 0}
        if i % 1_000 == 500:
            shape["key"] = b"k%d" % i
        if i % 1_000 == 501:
            shape["headers"] = [("h", b"%d" % i)]
        if i % 1_000 == 502:
            shape["timestamp"] = base_ms + i
        if i % 1_000 == 503:
            shape["partition"] = 1
        if i % 2_000 == 1_999:
            shape["partition"] = None
            shape["key"] = b"x"  # the partitioner's choice, by key
        shapes.append(shape)
    metadata: dict[int, RecordMetadata] = {}

    def on_delivery(i: int) -> Any:
        def delivered(error: BaseException | None, meta: RecordMetadata | None) -> None:
            assert error is None and meta is not None
            metadata[i] = meta

        return delivered

    with Producer({"bootstrap.servers": module_broker.bootstrap, "linger.ms": 20}) as producer:
        producer.produce(topic, b"first", partition=0)  # runs from here on: metadata known
        assert producer.flush(BOUND_S)
        for i, shape in enumerate(shapes):
            producer.produce(topic, b"%d" % i, on_delivery=on_delivery(i), **shape)
        assert producer.flush(BOUND_S)
    assert sorted(metadata) == list(range(len(shapes)))
    consumer = Consumer(
        {"bootstrap.servers": module_broker.bootstrap, "auto.offset.reset": "earliest"}
    )
    consumer.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
    got: dict[int, Any] = {}
    for _ in range(300):
        for record in consumer.poll(0.2):
            if record.value != b"first":
                got[int(record.value)] = record
        if len(got) == len(shapes):
            break
    consumer.close()
    assert sorted(got) == list(range(len(shapes)))
    for i, shape in enumerate(shapes):
        record, meta = got[i], metadata[i]
        assert (record.partition, record.offset) == (meta.partition, meta.offset), i
        if shape["partition"] is not None:
            assert record.partition == shape["partition"], i
        assert record.key == shape.get("key"), i
        assert record.headers == shape.get("headers", []), i
        if "timestamp" in shape:
            assert record.timestamp == meta.timestamp == shape["timestamp"], i
        else:
            assert record.timestamp == meta.timestamp > base_ms, i
    by_partition: dict[int, list[int]] = {}
    for i in range(len(shapes)):
        by_partition.setdefault(got[i].partition, []).append(got[i].offset)
    assert all(offsets == sorted(offsets) for offsets in by_partition.values())


def test_a_refused_batch_fails_each_of_its_records_callbacks(module_broker: BrokerProcess) -> None:
    create_topic(module_broker.bootstrap, "runs-small", 1, {"max.message.bytes": "2000"})
    outcomes: list[BaseException | None] = []
    conf = {"bootstrap.servers": module_broker.bootstrap, "linger.ms": 50, "retries": 0}
    conf["enable.idempotence"] = False
    with Producer(conf) as producer:
        for _ in range(100):  # one batch of ~4 KB: over the topic's max.message.bytes
            producer.produce(
                "runs-small", b"x" * 40, partition=0, on_delivery=lambda e, _m: outcomes.append(e)
            )
        assert producer.flush(BOUND_S)
    assert len(outcomes) == 100
    assert all(error is not None for error in outcomes), outcomes[:3]


def test_keys_pick_the_partitions_send_would(module_broker: BrokerProcess) -> None:
    create_topic(module_broker.bootstrap, "runs-keyed", 4)
    by_produce: dict[bytes, int] = {}
    offset_types: set[type] = set()

    def delivered(key: bytes, metadata: Any) -> None:
        by_produce[key] = metadata.partition
        offset_types.add(type(metadata.offset))

    with Producer({"bootstrap.servers": module_broker.bootstrap}) as producer:
        keys = [b"key-%d" % i for i in range(200)]
        for key in keys:
            producer.produce(
                "runs-keyed", b"v", key=key, on_delivery=lambda _e, m, key=key: delivered(key, m)
            )
        by_send = {key: producer.send("runs-keyed", b"v", key=key) for key in keys}
        assert producer.flush(BOUND_S)
    assert by_produce == {key: f.result(BOUND_S).partition for key, f in by_send.items()}
    assert len(set(by_produce.values())) == 4
    assert offset_types == {int}  # Python ints, not numpy's (the placement is numpy's)


def test_headers_given_as_an_iterator_arrive(module_broker: BrokerProcess) -> None:
    create_topic(module_broker.bootstrap, "runs-headers", 1)
    with Producer({"bootstrap.servers": module_broker.bootstrap}) as producer:
        producer.produce("runs-headers", b"v", partition=0, headers=iter([("h", b"x")]))
        assert producer.flush(BOUND_S)
    consumer = Consumer(
        {"bootstrap.servers": module_broker.bootstrap, "auto.offset.reset": "earliest"}
    )
    consumer.assign([TopicPartition("runs-headers", 0)])
    got = []
    for _ in range(100):
        got += consumer.poll(0.2)
        if got:
            break
    consumer.close()
    assert [list(r.headers) for r in got] == [[("h", b"x")]]


def test_a_record_that_cannot_be_encoded_fails_its_batch_and_the_rest_go_on(
    module_broker: BrokerProcess,
) -> None:
    """A str value (confluent-kafka's produce takes one; this client wants bytes) fails
    its batch's callbacks instead of leaving the partition in flight forever."""
    create_topic(module_broker.bootstrap, "runs-typed", 1)
    outcomes: list[BaseException | None] = []
    with Producer({"bootstrap.servers": module_broker.bootstrap}) as producer:
        producer.produce(
            "runs-typed", "text", partition=0, on_delivery=lambda e, _m: outcomes.append(e)
        )  # type: ignore[arg-type]
        assert producer.flush(BOUND_S)
        assert len(outcomes) == 1 and "cannot be encoded" in str(outcomes[0])
        producer.produce(
            "runs-typed", b"bytes", partition=0, on_delivery=lambda e, _m: outcomes.append(e)
        )
        assert producer.flush(BOUND_S)
    assert outcomes[1] is None
    assert read_values(module_broker.bootstrap, "runs-typed", 0, 1) == [b"bytes"]
