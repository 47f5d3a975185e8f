"""Members of a consumer group, each a real client polling on its own thread.

A member commits synchronously after every record it handles (with the record's
leader epoch), so its uncommitted window is at most the one record whose commit a
rebalance may refuse. What it consumed and committed is kept for the test to check.
Time bounds here only stop a hang; they never judge speed.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import confluent_kafka as ck
from kafka.protocol.consumer import OffsetFetchRequest

from epochlog.client.connection import BrokerConnection
from epochlog.seams.real import SocketNetwork

HANG_GUARD_S = 120.0


class GroupMember(threading.Thread):
    def __init__(self, kind: str, bootstrap: str, group: str, topic: str, name: str) -> None:
        super().__init__(name=name, daemon=True)
        self.kind = kind
        self.bootstrap = bootstrap
        self.group = group
        self.topic = topic
        self.consumed: list[tuple[int, int]] = []
        self.assigned: set[int] = set()
        self.commit_errors: list[str] = []
        self.errors: list[BaseException] = []
        self.stopping = threading.Event()
        self.started_polling = threading.Event()
        self.lock = threading.Lock()

    # -- client specifics ----------------------------------------------------------------

    def _open(self) -> Any:
        if self.kind == "confluent":
            consumer = ck.Consumer(
                {
                    "bootstrap.servers": self.bootstrap,
                    "group.id": self.group,
                    "client.id": self.name,
                    "auto.offset.reset": "earliest",
                    "enable.auto.commit": False,
                    "session.timeout.ms": 10000,
                    "heartbeat.interval.ms": 500,
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
            heartbeat_interval_ms=500,
        )
        # Topic metadata first: a kafka-python 3.0 leader that joined before it had the
        # topic's metadata assigns nothing, rejoins at once, and then now and then never
        # handles the answer to its next SyncGroup (the broker's group went Stable) and
        # stops heartbeating (seen 1 run in ~10 with group.initial.rebalance.delay.ms=0).
        assert consumer.partitions_for_topic(self.topic), f"no metadata for {self.topic}"
        consumer.subscribe([self.topic])
        return consumer

    def _poll(self, consumer: Any) -> list[tuple[int, int, int]]:
        """(partition, offset, leader epoch) of the records one poll returned."""
        if self.kind == "confluent":
            out = []
            for m in consumer.consume(100, 0.1):
                if m.error() is not None:
                    continue
                epoch = m.leader_epoch()
                out.append((m.partition(), m.offset(), -1 if epoch is None else epoch))
            return out
        batches = consumer.poll(timeout_ms=100, max_records=100)
        return [(m.partition, m.offset, m.leader_epoch) for b in batches.values() for m in b]

    def _commit(self, consumer: Any, partition: int, offset: int, epoch: int) -> None:
        try:
            if self.kind == "confluent":
                tp = ck.TopicPartition(self.topic, partition, offset + 1, leader_epoch=epoch)
                consumer.commit(offsets=[tp], asynchronous=False)
            else:
                from kafka import TopicPartition
                from kafka.structs import OffsetAndMetadata

                consumer.commit(
                    {
                        TopicPartition(self.topic, partition): OffsetAndMetadata(
                            offset + 1, "", epoch
                        )
                    }
                )
        except Exception as exc:  # a rebalance may refuse one commit: that is the window
            self.commit_errors.append(repr(exc))

    def _assignment(self, consumer: Any) -> set[int]:
        return {tp.partition for tp in consumer.assignment()}

    # -- the thread ------------------------------------------------------------------------

    def run(self) -> None:
        try:
            consumer = self._open()
        except BaseException as exc:
            self.errors.append(exc)
            return
        try:
            while not self.stopping.is_set():
                records = self._poll(consumer)
                self.started_polling.set()
                for partition, offset, epoch in records:
                    with self.lock:
                        self.consumed.append((partition, offset))
                    self._commit(consumer, partition, offset, epoch)
                with self.lock:
                    self.assigned = self._assignment(consumer)
        except BaseException as exc:
            self.errors.append(exc)
        finally:
            consumer.close()

    def stop(self) -> None:
        self.stopping.set()
        self.join(HANG_GUARD_S)
        assert not self.is_alive(), f"{self.name} did not stop"
        assert not self.errors, f"{self.name} failed: {self.errors}"


def wait_for(
    predicate: Callable[[], bool],
    what: str,
    members: Sequence[GroupMember] = (),
    timeout: float = HANG_GUARD_S,
) -> None:
    """Wait for ``predicate``; a member whose thread failed ends the wait at once, and
    a timeout names every member's state, so a failure says which client stalled."""
    deadline = time.monotonic() + timeout
    while not predicate():
        failed = [m for m in members if m.errors]
        if failed or time.monotonic() > deadline:
            states = "; ".join(
                f"{m.name}: alive={m.is_alive()} assigned={sorted(m.assigned)} "
                f"consumed={len(m.consumed)} errors={m.errors!r}"
                for m in members
            )
            raise AssertionError(
                f"{'failed' if failed else 'timed out'} waiting for {what}: {states}"
            )
        time.sleep(0.05)


def committed(port: int, group: str, version: int = 8) -> dict[int, tuple[int, int]]:
    """partition -> (committed offset, committed leader epoch), through OffsetFetch."""

    async def fetch() -> Any:
        conn = await BrokerConnection.open(SocketNetwork(), "127.0.0.1", port)
        try:
            if version >= 8:
                request = OffsetFetchRequest(
                    groups=[OffsetFetchRequest.OffsetFetchRequestGroup(group_id=group, topics=None)]
                )
            else:
                request = OffsetFetchRequest(group_id=group, topics=None)
            return await conn.send(request, version)
        finally:
            await conn.close()

    response = asyncio.run(fetch())
    topics = response.groups[0].topics if version >= 8 else response.topics
    return {
        p.partition_index: (p.committed_offset, p.committed_leader_epoch)
        for t in topics
        for p in t.partitions
    }
