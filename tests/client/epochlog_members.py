"""Group members on their own threads (epochlog's sync Consumer, confluent-kafka or
kafka-python),
committing after every poll, and the waits and views the group tests share."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from epochlog.client import Consumer, Producer, TopicPartition

PARTITIONS = 6
HANG_GUARD_S = 120.0
SETTINGS = {
    "offsets.topic.num.partitions": 3,
    "offsets.topic.replication.factor": 1,
    "group.initial.rebalance.delay.ms": 0,
}


class Member(threading.Thread):
    """One group member polling on its own thread; commits after every poll."""

    def __init__(self, kind: str, bootstrap: str, group: str, topic: str, name: str, **conf: Any):
        super().__init__(name=name, daemon=True)
        self.kind, self.bootstrap, self.group, self.topic = kind, bootstrap, group, topic
        self.conf = conf
        self.consumed: list[tuple[int, int, int | None]] = []
        self.assigned: set[int] = set()
        self.errors: list[BaseException] = []
        self.commit_errors: list[str] = []
        self.stopping = threading.Event()
        self.lock = threading.Lock()

    def _open(self) -> Any:
        if self.kind == "epochlog":
            consumer = Consumer(
                {
                    "bootstrap.servers": self.bootstrap,
                    "group.id": self.group,
                    "client.id": self.name,
                    "auto.offset.reset": "earliest",
                    "enable.auto.commit": False,
                    "session.timeout.ms": 10000,
                    "heartbeat.interval.ms": 300,
                    "retry.backoff.ms": 20,
                    **self.conf,
                }
            )
            consumer.subscribe([self.topic])
            return consumer
        if self.kind == "confluent":
            import confluent_kafka as ck

            consumer = ck.Consumer(
                {
                    "bootstrap.servers": self.bootstrap,
                    "group.id": self.group,
                    "client.id": self.name,
                    "auto.offset.reset": "earliest",
                    "enable.auto.commit": False,
                    "session.timeout.ms": 10000,
                    "heartbeat.interval.ms": 300,
                    "partition.assignment.strategy": "range",
                }
            )
            consumer.subscribe([self.topic])
            return consumer
        from kafka import KafkaConsumer

        consumer = KafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=self.group,
            client_id=self.name,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=10000,
            heartbeat_interval_ms=300,
        )
        consumer.subscribe([self.topic])
        return consumer

    def _poll_and_commit(self, consumer: Any) -> None:
        if self.kind == "epochlog":
            records = consumer.poll(0.2)
            got = [(r.partition, r.offset, r.leader_epoch) for r in records]
            commit: Callable[[], None] = lambda: consumer.commit(records.next_offsets())  # noqa: E731
        elif self.kind == "confluent":
            got = []
            for m in consumer.consume(100, 0.2):
                if m.error() is None:
                    got.append((m.partition(), m.offset(), m.leader_epoch()))
            commit = lambda: self._confluent_commit(consumer, got)  # noqa: E731
        else:
            batches = consumer.poll(timeout_ms=200)
            got = [(m.partition, m.offset, m.leader_epoch) for b in batches.values() for m in b]
            commit = lambda: self._kafka_python_commit(consumer, got)  # noqa: E731
        with self.lock:
            self.consumed.extend(got)
        if got:
            try:
                commit()
            except Exception as exc:  # a rebalance may refuse one commit
                self.commit_errors.append(repr(exc))
        with self.lock:
            self.assigned = {tp.partition for tp in consumer.assignment()}

    def _confluent_commit(self, consumer: Any, got: list[tuple[int, int, int]]) -> None:
        import confluent_kafka as ck

        last = {p: (o, e) for p, o, e in got}
        consumer.commit(
            offsets=[
                ck.TopicPartition(self.topic, p, o + 1, leader_epoch=e)
                for p, (o, e) in last.items()
            ],
            asynchronous=False,
        )

    def _kafka_python_commit(self, consumer: Any, got: list[tuple[int, int, int]]) -> None:
        from kafka import TopicPartition as KafkaTopicPartition
        from kafka.structs import OffsetAndMetadata

        last = {p: (o, e) for p, o, e in got}
        consumer.commit(
            {
                KafkaTopicPartition(self.topic, p): OffsetAndMetadata(o + 1, "", e)
                for p, (o, e) in last.items()
            }
        )

    def run(self) -> None:
        try:
            consumer = self._open()
        except BaseException as exc:
            self.errors.append(exc)
            return
        try:
            while not self.stopping.is_set():
                self._poll_and_commit(consumer)
        except BaseException as exc:
            self.errors.append(exc)
        finally:
            consumer.close()

    def stop(self) -> None:
        self.stopping.set()
        self.join(HANG_GUARD_S)
        assert not self.is_alive(), f"{self.name} did not stop"
        assert not self.errors, f"{self.name} failed: {self.errors}"


def wait_for(predicate: Callable[[], bool], what: str, members: Sequence[Member]) -> None:
    """Wait for ``predicate`` (a hang guard, not a speed check); a failed member ends
    the wait at once and the message names every member's state."""
    deadline = time.monotonic() + HANG_GUARD_S
    while not predicate():
        failed = [m for m in members if m.errors]
        if failed or time.monotonic() > deadline:
            states = "; ".join(
                f"{m.name}: alive={m.is_alive()} assigned={sorted(m.assigned)} "
                f"consumed={len(m.consumed)} errors={m.errors!r}"
                for m in members
            )
            raise AssertionError(f"waiting for {what}: {states}")
        time.sleep(0.05)


def produce(bootstrap: str, topic: str, per_partition: int, phase: int) -> None:
    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 0}) as producer:
        futures = [
            producer.produce(topic, f"{phase}-{p}-{i}".encode(), partition=p)
            for p in range(PARTITIONS)
            for i in range(per_partition)
        ]
        assert producer.flush(HANG_GUARD_S)
        for f in futures:
            f.result(HANG_GUARD_S)


def spread(members: Sequence[Member]) -> list[int]:
    return sorted(len(m.assigned) for m in members)


def total(members: Sequence[Member]) -> int:
    return sum(len(m.consumed) for m in members)


def distinct(members: Sequence[Member]) -> set[tuple[int, int]]:
    return {(p, o) for m in members for p, o, _ in m.consumed}


def committed(bootstrap: str, group: str, topic: str) -> dict[TopicPartition, Any]:
    with Consumer({"bootstrap.servers": bootstrap, "group.id": group}) as reader:
        return reader.committed([TopicPartition(topic, p) for p in range(PARTITIONS)])
