"""Follower fetching (KIP-392) with real clients on three broker processes, each in a rack
of its own (``broker.rack``), with Kafka's RackAwareReplicaSelector: consumers with a
``client.rack`` (confluent-kafka, kafka-python, epochlog's) read every record, and each
broker's own BytesOut counter shows who served them (the follower in the consumer's
rack; the leader not one byte). A follower never serves past its high watermark, and a
leader change while a rack-aware consumer reads loses and duplicates nothing."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import confluent_kafka as ck
from cluster_harness import Cluster, eventually
from continuous_producer import ContinuousProducer, check_log_holds_exactly_the_acknowledged
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition

from epochlog.client import Consumer, TopicPartition
from epochlog.protocol.errors import ErrorCode
from epochlog.settings.replica_selector import RACK_AWARE_SELECTOR
from support.clients import confluent_producer
from support.metrics import scrape
from support.records import Got, values_of
from support.requests import fetch_request

TOPIC = "racked"
RACKS = {0: "rack-a", 1: "rack-b", 2: "rack-c"}
BYTES_IN = "kafka_server_brokertopicmetrics_bytesin_total"
BYTES_OUT = "kafka_server_brokertopicmetrics_bytesout_total"
REQUESTS = "kafka_network_requestmetrics_requests_total"
ERRORS = "kafka_network_requestmetrics_errors_total"
COUNT = 300
BOUND_S = 60.0


@contextmanager
def racked_cluster(tmp_path: Path, **settings: str) -> Iterator[tuple[Cluster, dict[int, int]]]:
    """Three brokers, broker i in RACKS[i], rack-aware, each serving /metrics."""
    cluster = Cluster(
        tmp_path,
        f"sqlite://{tmp_path}/metastore.db",
        3,
        {"replica.selector.class": RACK_AWARE_SELECTOR, **settings},
    )
    for broker in cluster.brokers:
        broker.settings["broker.rack"] = RACKS[broker.broker_id]
    ports = cluster.serve_metrics()
    with cluster:
        yield cluster, ports


def produce(bootstrap: str, first: int, count: int) -> None:
    producer = confluent_producer(bootstrap)
    errors: list[object] = []
    for i in range(first, first + count):
        producer.produce(
            TOPIC,
            value=b"v%d" % i,
            partition=0,
            on_delivery=lambda err, _msg: errors.append(err) if err else None,
        )
    assert producer.flush(BOUND_S) == 0 and errors == []


def bytes_out(ports: dict[int, int]) -> dict[int, float]:
    return {b: scrape(port).total(BYTES_OUT, topic=TOPIC) for b, port in ports.items()}


def confluent_rack_consumer(bootstrap: str, rack: str) -> ck.Consumer:
    consumer = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "client.rack": rack,
        }
    )
    consumer.assign([ck.TopicPartition(TOPIC, 0, ck.OFFSET_BEGINNING)])
    return consumer


# One short poll of a consumer reading the topic from its start.
Poll = Callable[[], list[Got]]


@contextmanager
def confluent_polling(bootstrap: str, rack: str) -> Iterator[Poll]:
    consumer = confluent_rack_consumer(bootstrap, rack)

    def poll() -> list[Got]:
        m = consumer.poll(0.1)
        if m is None or m.error() is not None:
            return []
        return [Got(m.offset(), m.key(), m.value(), [], 0)]

    try:
        yield poll
    finally:
        consumer.close()


@contextmanager
def kafka_python_polling(bootstrap: str, rack: str) -> Iterator[Poll]:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False, client_rack=rack
    )
    consumer.assign([KafkaTopicPartition(TOPIC, 0)])
    consumer.seek_to_beginning()

    def poll() -> list[Got]:
        batches = consumer.poll(timeout_ms=100).values()
        return [Got(r.offset, r.key, r.value, [], 0) for records in batches for r in records]

    try:
        yield poll
    finally:
        consumer.close()


@contextmanager
def epochlog_polling(bootstrap: str, rack: str) -> Iterator[Poll]:
    config = {"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest", "client.rack": rack}
    with Consumer(config) as consumer:
        consumer.assign([TopicPartition(TOPIC, 0)])
        yield lambda: [Got(r.offset, r.key, r.value, [], 0) for r in consumer.poll(0.1)]


Polling = Callable[[str, str], AbstractContextManager[Poll]]
CLIENTS: dict[str, Polling] = {
    "confluent-kafka": confluent_polling,
    "kafka-python": kafka_python_polling,
    "epochlog": epochlog_polling,
}


def read(polling: Polling, bootstrap: str, rack: str, count: int) -> list[bytes | None]:
    got: list[Got] = []
    deadline = time.monotonic() + BOUND_S
    with polling(bootstrap, rack) as poll:
        while len(got) < count and time.monotonic() < deadline:
            got += poll()
    return [g.value for g in got]


def test_consumers_with_a_client_rack_read_everything_from_the_follower_in_their_rack(
    tmp_path: Path,
) -> None:
    with racked_cluster(tmp_path) as (cluster, ports):
        cluster.create_topic(TOPIC, assignment=[[0, 1, 2]], min_insync_replicas="2")
        produce(cluster.bootstrap, 0, COUNT)
        want = [b"v%d" % i for i in range(COUNT)]
        appended = scrape(ports[0]).value(BYTES_IN, topic=TOPIC)
        assert appended > 0

        for name, follower in (("confluent-kafka", 1), ("kafka-python", 2), ("epochlog", 1)):
            before = bytes_out(ports)
            assert read(CLIENTS[name], cluster.bootstrap, RACKS[follower], COUNT) == want, name
            after = bytes_out(ports)
            served = {b: after[b] - before[b] for b in after}
            # Every record byte came from the follower in the consumer's rack.
            assert served[follower] >= appended, (name, served)
            assert served[0] == 0 == served[3 - follower], (name, served)
            follower_fetches = scrape(ports[follower]).total(REQUESTS, request="FetchConsumer")
            assert follower_fetches > 0, name

        # epochlog's consumer keeps an incremental fetch session (KIP-227) with the
        # follower it reads from: records produced later come in incremental fetches.
        config = {"bootstrap.servers": cluster.bootstrap, "client.rack": RACKS[1]}
        with Consumer(config) as consumer:
            consumer.assign([TopicPartition(TOPIC, 0)])
            consumer.seek(TopicPartition(TOPIC, 0), COUNT)
            got: list[bytes | None] = []
            for first in (COUNT, COUNT + 5):
                produce(cluster.bootstrap, first, 5)
                deadline = time.monotonic() + BOUND_S
                while len(got) < first + 5 - COUNT and time.monotonic() < deadline:
                    got += [r.value for r in consumer.poll(0.2)]
            assert got == [b"v%d" % i for i in range(COUNT, COUNT + 10)]
            session = consumer._consumer._fetch_sessions[1]
            assert session.session_id != 0 and session.epoch >= 2

        # Once metadata.max.age.ms passes it asks the leader again, which sends it back:
        # the leader's Fetch count grows, its BytesOut does not.
        def leader_fetches() -> float:
            return scrape(ports[0]).total(REQUESTS, request="FetchConsumer")

        config["metadata.max.age.ms"] = "300"
        with Consumer(config) as consumer:
            consumer.assign([TopicPartition(TOPIC, 0)])
            consumer.seek(TopicPartition(TOPIC, 0), COUNT + 10)
            asked = leader_fetches()
            deadline = time.monotonic() + BOUND_S
            while leader_fetches() < asked + 3 and time.monotonic() < deadline:
                assert consumer.poll(0.2) == []
            assert leader_fetches() >= asked + 3
        assert bytes_out(ports)[0] == 0

        # Without a rack, or in the leader's, the leader serves as before.
        before = bytes_out(ports)
        assert read(confluent_polling, cluster.bootstrap, "", COUNT) == want
        assert read(confluent_polling, cluster.bootstrap, RACKS[0], COUNT) == want
        after = bytes_out(ports)
        assert after[0] - before[0] >= 2 * appended
        assert after[1] == before[1] and after[2] == before[2]


def rack_fetch(cluster: Cluster, broker: int, offset: int) -> Any:
    """A consumer's Fetch v12 with a client rack, answered as it is."""
    request = fetch_request(TOPIC, offset, min_bytes=0, rack_id=RACKS[broker])
    return cluster.send(broker, request, 12).responses[0].partitions[0]


def test_a_follower_never_serves_a_record_above_its_high_watermark(tmp_path: Path) -> None:
    # A paused replica stays registered and in the ISR for the test's length.
    settings = {"zookeeper.session.timeout.ms": "60000", "replica.lag.time.max.ms": "60000"}
    with racked_cluster(tmp_path, **settings) as (cluster, ports):
        cluster.create_topic(TOPIC, assignment=[[0, 1, 2]])
        produce(cluster.bootstrap, 0, 10)
        eventually(lambda: rack_fetch(cluster, 1, 0).high_watermark == 10, 30, "HW 10 on 1")
        consumer = confluent_rack_consumer(cluster.bootstrap, RACKS[1])
        try:
            got: list[bytes] = []

            def poll_until(count: int, at_least_s: float = 0.0) -> None:
                """Until ``count`` records are in (bounded), polling on for at least
                ``at_least_s`` so that a record served too early would show."""
                deadline = time.monotonic() + BOUND_S
                keep_until = time.monotonic() + at_least_s
                while time.monotonic() < deadline and (
                    len(got) < count or time.monotonic() < keep_until
                ):
                    message = consumer.poll(0.1)
                    if message is not None and message.error() is None:
                        got.append(message.value())

            # The consumer reads the first ten and has found its group's coordinator
            # before the third replica stops: a coordinator looked up later would wait for
            # ``__consumer_offsets`` partitions placed on the stopped broker, holding the
            # consumer's requests past the session timeout that keeps that broker in the ISR.
            poll_until(10)
            consumer.committed([ck.TopicPartition(TOPIC, 0)], timeout=BOUND_S)
            # The third replica stops: the high watermark holds at 10 while the follower
            # in the consumer's rack copies five records acknowledged by the leader alone.
            cluster.pause(2)
            records = [(b"k", b"v%d" % i) for i in range(10, 15)]
            assert cluster.produce(0, TOPIC, records, acks=1)[0] == 0
            eventually(lambda: cluster.log_end_offset(1, TOPIC) == 15, 30, "15 on broker 1")
            answer = rack_fetch(cluster, 1, 0)
            assert answer.error_code == ErrorCode.NONE and answer.high_watermark == 10
            assert [offset for offset, _ in values_of(answer.records)] == list(range(10))
            at_hw = rack_fetch(cluster, 1, 10)
            assert (at_hw.error_code, values_of(at_hw.records)) == (ErrorCode.NONE, [])
            poll_until(10, at_least_s=2.0)
            assert got == [b"v%d" % i for i in range(10)]

            cluster.resume(2)
            poll_until(15)
            assert got == [b"v%d" % i for i in range(15)]
        finally:
            consumer.close()
        served = bytes_out(ports)
        assert served[0] == 0 == served[2] and served[1] > 0


class RackReader:
    """A consumer in rack-b reading from the start in a thread of its own, until told
    how many records to expect."""

    def __init__(self, polling: Polling, bootstrap: str) -> None:
        self.got: list[Got] = []
        self.expected: int | None = None
        self.failure: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(polling, bootstrap), daemon=True)
        self._thread.start()

    def _run(self, polling: Polling, bootstrap: str) -> None:
        try:
            with polling(bootstrap, RACKS[1]) as poll:
                while self.expected is None or len(self.got) < self.expected:
                    self.got += poll()
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            self.failure = exc

    def finish(self, expected: int) -> list[Got]:
        self.expected = expected
        self._thread.join(BOUND_S)
        assert not self._thread.is_alive(), f"read {len(self.got)} of {expected}"
        assert self.failure is None, repr(self.failure)
        return self.got


def test_a_leader_change_while_a_rack_aware_consumer_reads_loses_and_duplicates_nothing(
    tmp_path: Path,
) -> None:
    # Replicas slowed by a loaded machine stay in the ISR, so that broker 2, next in
    # line, takes over and the consumers' follower (1) stays a follower.
    with racked_cluster(tmp_path, **{"replica.lag.time.max.ms": "15000"}) as (cluster, ports):
        cluster.create_topic(TOPIC, assignment=[[0, 2, 1]], min_insync_replicas="2")
        producer = ContinuousProducer(cluster.bootstrap, TOPIC).start()
        readers = {name: RackReader(poll, cluster.bootstrap) for name, poll in CLIENTS.items()}
        eventually(lambda: producer.acked() >= 2000, 60, "acks before the leader change")
        for name, reader in readers.items():
            eventually(lambda r=reader: len(r.got) >= 1000, 60, f"{name} reads before the change")
        assert scrape(ports[1]).total(BYTES_OUT, topic=TOPIC) > 0

        cluster.kill(0)
        eventually(lambda: cluster.leader(TOPIC)[0] in (1, 2), 60, "a new leader")
        acked_at_change = producer.acked()
        # The new leader knows where rack-b's follower ends only once it has fetched in
        # the new epoch (which every acknowledgement from now on needs: the ISR is 2 and
        # 1); until then it serves the consumers itself, as Kafka's selector does. Once
        # each reader is past a thousand records produced after the change, it has been
        # sent to the follower, and the leader serves it nothing more.
        settled = acked_at_change + 1000
        eventually(lambda: producer.acked() >= settled, 60, "acks after")
        for name, reader in readers.items():
            eventually(lambda r=reader: len(r.got) >= settled, 60, f"{name} reads after")
        served_by_leader = scrape(ports[2]).total(BYTES_OUT, topic=TOPIC)
        eventually(lambda: producer.acked() >= settled + 1000, 60, "more acks")
        reports = producer.stop()
        for name, reader in readers.items():
            try:
                check_log_holds_exactly_the_acknowledged(reports, reader.finish(len(reports)))
            except AssertionError as exc:
                raise AssertionError(f"{name}: {exc}") from exc
        # The last thousand records came from rack-b's replica (a follower unless it was
        # elected): the old leader is gone and the new one served none of them.
        assert scrape(ports[2]).total(BYTES_OUT, topic=TOPIC) == served_by_leader


def test_consumers_go_back_to_the_leader_when_the_follower_in_their_rack_dies(
    tmp_path: Path,
) -> None:
    with racked_cluster(tmp_path) as (cluster, ports):
        cluster.create_topic(TOPIC, assignment=[[0, 1, 2]], min_insync_replicas="2")
        produce(cluster.bootstrap, 0, COUNT)
        readers = {name: RackReader(poll, cluster.bootstrap) for name, poll in CLIENTS.items()}
        for name, reader in readers.items():
            eventually(lambda r=reader: len(r.got) >= COUNT, 60, f"{name} reads from 1")
        assert bytes_out(ports)[0] == 0

        cluster.kill(1)
        produce(cluster.live_bootstrap(), COUNT, COUNT)
        want = [(i, b"v%d" % i) for i in range(2 * COUNT)]
        for name, reader in readers.items():
            assert [(g.offset, g.value) for g in reader.finish(2 * COUNT)] == want, name
        # Nobody else in rack-b: the leader served the rest.
        assert scrape(ports[0]).total(BYTES_OUT, topic=TOPIC) > 0


def test_out_of_range_on_the_follower_sends_the_consumer_to_the_leader_which_resets_it(
    tmp_path: Path,
) -> None:
    """A seek below the log start while reading from the follower: the follower answers
    OFFSET_OUT_OF_RANGE. The Java consumer's rule (epochlog's): that never resets a
    position, the consumer asks the leader, whose own OFFSET_OUT_OF_RANGE resets it.
    librdkafka's: below the follower's log start it resets at once (only an offset
    above the follower's high watermark sends it back to the leader)."""
    start = 100
    with racked_cluster(tmp_path) as (cluster, ports):
        cluster.create_topic(TOPIC, assignment=[[0, 1, 2]], min_insync_replicas="2")
        produce(cluster.bootstrap, 0, COUNT)
        want = [(i, b"v%d" % i) for i in range(start, COUNT)]

        def out_of_range() -> dict[int, float]:
            return {
                b: scrape(ports[b]).total(ERRORS, request="Fetch", error="OFFSET_OUT_OF_RANGE")
                for b in (0, 1)
            }

        def delete_once() -> None:
            if rack_fetch(cluster, 1, 0).error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                return
            admin = ck.admin.AdminClient({"bootstrap.servers": cluster.bootstrap})
            (done,) = admin.delete_records([ck.TopicPartition(TOPIC, 0, start)]).values()
            assert done.result(30).low_watermark == start
            eventually(
                lambda: rack_fetch(cluster, 1, 0).error_code == ErrorCode.OFFSET_OUT_OF_RANGE,
                30,
                "the follower to learn the new log start",
            )

        # confluent-kafka: reading from the follower, then a seek below the log start.
        consumer = confluent_rack_consumer(cluster.bootstrap, RACKS[1])
        try:
            got: list[tuple[int, bytes | None]] = []

            def poll_until(count: int) -> None:
                deadline = time.monotonic() + BOUND_S
                while len(got) < count and time.monotonic() < deadline:
                    m = consumer.poll(0.1)
                    if m is not None and m.error() is None:
                        got.append((m.offset(), m.value()))

            poll_until(COUNT)
            delete_once()
            before = out_of_range()
            got.clear()
            consumer.seek(ck.TopicPartition(TOPIC, 0, 0))
            poll_until(len(want))
            assert got == want
        finally:
            consumer.close()
        after = out_of_range()
        assert after[1] > before[1], (before, after)

        # epochlog's consumer, the same way.
        config = {
            "bootstrap.servers": cluster.bootstrap,
            "auto.offset.reset": "earliest",
            "client.rack": RACKS[1],
        }
        with Consumer(config) as ours:
            ours.assign([TopicPartition(TOPIC, 0)])
            mine: list[tuple[int, bytes | None]] = []

            def read_until(count: int) -> None:
                deadline = time.monotonic() + BOUND_S
                while len(mine) < count and time.monotonic() < deadline:
                    mine.extend((r.offset, r.value) for r in ours.poll(0.2))

            read_until(len(want))
            assert mine == want
            before = out_of_range()
            mine.clear()
            ours.seek(TopicPartition(TOPIC, 0), 0)
            read_until(len(want))
            assert mine == want
        after = out_of_range()
        assert after[1] > before[1] and after[0] > before[0], (before, after)
        assert bytes_out(ports)[0] == 0  # the leader only answered the errors
