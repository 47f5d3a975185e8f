"""Exactly-once consume-transform-produce with confluent-kafka (the pattern of
librdkafka's transactions example) on a 3-broker cluster while the transaction
coordinator's broker and then an output partition's leader are SIGKILLed, each
restarted a little later: the output, read with read_committed, holds every input
record exactly once, and the committed input offsets carry leader epochs (KIP-320's
TxnOffsetCommit)."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import confluent_kafka as ck
import pytest
from cluster_harness import Cluster, eventually, running_cluster, send_request
from kafka.protocol.metadata import FindCoordinatorRequest

from support.clients import confluent_producer

pytestmark = pytest.mark.long

RECORDS = int(os.environ.get("EPOCHLOG_EOS_RECORDS", "100000"))
PARTITIONS = 3
TXN_ID = "eos-loop"
# How long a killed broker stays down at most before it is restarted.
DOWNTIME_S = 15.0
GROUP = "eos-loop-group"
SETTINGS = {
    "transaction.state.log.num.partitions": "3",
    "offsets.topic.num.partitions": "3",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
}


class EosLoop:
    """Reads `in`, writes each value upper-cased to `out`, commits input offsets in the
    same transaction; on an abortable error it aborts and rewinds to the committed
    offsets, as librdkafka's example does."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.done = 0
        # The loop holds (polls nothing) once `done` reaches this, so that each kill
        # falls in the middle of the run however fast the machine is.
        self.hold_at = RECORDS
        self.transactions = 0
        self.aborts = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> EosLoop:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(120)

    def _run(self) -> None:
        try:
            self._loop()
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            self.error = exc

    def _loop(self) -> None:
        consumer = ck.Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": GROUP,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "session.timeout.ms": 30_000,
            }
        )
        producer = ck.Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "transactional.id": TXN_ID,
                "transaction.timeout.ms": 60_000,
                "linger.ms": 5,
                # librdkafka 2.16 keeps waiting for a group coordinator whose broker left
                # the metadata, and looks again only when one of its connections goes up
                # or down (confluentinc/librdkafka#5511); closing idle connections gives it
                # that chance within seconds instead of never.
                "connections.max.idle.ms": 5_000,
            }
        )
        producer.init_transactions(120)
        consumer.subscribe(["in"])
        try:
            while not self._stop.is_set():
                if self.done >= self.hold_at:
                    time.sleep(0.05)
                    continue
                messages = consumer.consume(1000, 0.5)
                messages = [m for m in messages if m.error() is None]
                if not messages:
                    continue
                self._transaction(producer, consumer, messages)
        finally:
            consumer.close()

    def _transaction(
        self, producer: ck.Producer, consumer: ck.Consumer, messages: list[ck.Message]
    ) -> None:
        producer.begin_transaction()
        for m in messages:
            producer.produce("out", key=m.key(), value=(m.value() or b"").upper())
        while True:
            try:
                producer.send_offsets_to_transaction(
                    consumer.position(consumer.assignment()),
                    consumer.consumer_group_metadata(),
                    60,
                )
                producer.commit_transaction(120)
                self.transactions += 1
                self.done += len(messages)
                return
            except ck.KafkaException as exc:
                error = exc.args[0]
                if error.retriable():
                    continue
                if error.txn_requires_abort():
                    producer.abort_transaction(120)
                    self.aborts += 1
                    committed = consumer.committed(consumer.assignment(), 60)
                    for tp in committed:
                        if tp.offset < 0:
                            tp.offset = ck.OFFSET_BEGINNING
                        consumer.seek(tp)
                    return
                raise


def coordinator_of(cluster: Cluster, transactional_id: str) -> int:
    """The transaction coordinator's broker id, or -1 while there is none."""
    broker = cluster.responsive()[0]
    answer = asyncio.run(
        send_request(broker.port, FindCoordinatorRequest(key=transactional_id, key_type=1), 3)
    )
    return int(answer.node_id) if answer.error_code == 0 else -1


def down_for_a_while(
    cluster: Cluster, broker_id: int, loop: EosLoop, moved: Callable[[], bool]
) -> None:
    """SIGKILL a broker and restart it once its partitions have moved and the loop
    has gone on without it (or DOWNTIME_S has passed).

    The broker returns, as it would on a Kafka cluster, so that the second kill still
    leaves the in-sync replicas acks=all needs.
    """
    cluster.kill(broker_id)
    at_kill = loop.done
    eventually(lambda: moved() or loop.error, 60, f"partitions of broker {broker_id} moved")
    deadline = time.monotonic() + DOWNTIME_S
    while time.monotonic() < deadline and loop.done < at_kill + 2000 and loop.error is None:
        time.sleep(0.1)
    cluster.brokers[broker_id].restart()
    cluster.wait_for_brokers()


def test_consume_transform_produce_survives_coordinator_and_leader_kills_exactly_once(
    tmp_path: Path,
) -> None:
    metastore = f"sqlite://{tmp_path / 'metastore.db'}"
    with running_cluster(tmp_path, metastore, **SETTINGS) as cluster:
        for topic in ("in", "out"):
            cluster.create_topic(
                topic, partitions=PARTITIONS, replication=3, min_insync_replicas="2"
            )
        producer = confluent_producer(cluster.bootstrap, **{"linger.ms": 20})
        for i in range(RECORDS):
            producer.produce("in", key=f"k{i}".encode(), value=f"v{i}".encode())
            if i % 10_000 == 0:
                producer.poll(0)
        assert producer.flush(120) == 0

        loop = EosLoop(cluster.bootstrap)
        # Each phase may run on a little (records done while a broker is down), never
        # to the end before its kill.
        loop.hold_at = RECORDS // 3 + RECORDS // 10
        loop.start()
        try:
            eventually(lambda: loop.done >= RECORDS // 3 or loop.error, 300, "a third done")
            assert loop.error is None, loop.error
            coordinator = coordinator_of(cluster, TXN_ID)
            assert coordinator >= 0
            at_first_kill = loop.done
            down_for_a_while(
                cluster,
                coordinator,
                loop,
                lambda: coordinator_of(cluster, TXN_ID) not in (coordinator, -1),
            )
            loop.hold_at = 2 * RECORDS // 3 + RECORDS // 10
            eventually(lambda: loop.done >= 2 * RECORDS // 3 or loop.error, 300, "two thirds")
            assert loop.error is None, loop.error
            # The second kill is an output leader, preferably not the coordinator now (it
            # may have moved while the first one was down); when the coordinator leads
            # every output partition, it is killed again as their leader.
            coordinator_now = coordinator_of(cluster, TXN_ID)
            leaders = {p: cluster.leader("out", p)[0] for p in range(PARTITIONS)}
            victim = (
                sorted(set(leaders.values()) - {coordinator, coordinator_now})
                or sorted(set(leaders.values()) - {coordinator_now})
                or [coordinator_now]
            )[0]
            led = [p for p, leader in leaders.items() if leader == victim]
            at_second_kill = loop.done
            loop.hold_at = RECORDS
            down_for_a_while(
                cluster,
                victim,
                loop,
                lambda: all(cluster.leader("out", p)[0] not in (victim, -1) for p in led),
            )
            eventually(lambda: loop.done >= RECORDS or loop.error, 300, "every record")
            assert loop.error is None, loop.error
        finally:
            loop.stop()
        # Both kills fell in the middle of the run.
        assert at_first_kill < RECORDS and at_second_kill < RECORDS, (at_first_kill, at_second_kill)

        seen = read_committed(cluster.live_bootstrap(), "out", RECORDS)
        counts = Counter(seen)
        twice = [k for k, n in counts.items() if n > 1]
        assert not twice, f"{len(twice)} keys twice, e.g. {twice[:5]}"
        missing = {f"k{i}" for i in range(RECORDS)} - set(counts)
        assert not missing, f"{len(missing)} keys missing, e.g. {sorted(missing)[:5]}"

        consumer = ck.Consumer({"bootstrap.servers": cluster.live_bootstrap(), "group.id": GROUP})
        try:
            committed = consumer.committed(
                [ck.TopicPartition("in", p) for p in range(PARTITIONS)], 60
            )
        finally:
            consumer.close()
        assert sum(tp.offset for tp in committed) == RECORDS
        assert all(tp.leader_epoch is not None and tp.leader_epoch >= 0 for tp in committed)


def read_committed(bootstrap: str, topic: str, expected: int) -> list[str]:
    consumer = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "eos-check",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    keys: list[str] = []
    try:
        consumer.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(3)])
        idle_since = time.monotonic()
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            batch = [m for m in consumer.consume(1000, 0.5) if m.error() is None]
            for m in batch:
                assert (m.value() or b"").isupper() or not m.value()
                keys.append((m.key() or b"").decode())
            if batch:
                idle_since = time.monotonic()
            elif len(keys) >= expected and time.monotonic() - idle_since > 3:
                break
    finally:
        consumer.close()
    return keys
