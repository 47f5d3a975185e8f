"""Consumer-group members on their own threads, one real client each (epochlog's sync
Consumer, confluent-kafka or kafka-python), and the waits and views group tests share.

A member commits with each record's leader epoch, either once per poll (the last
record of each partition) or after every record it handles, so that its uncommitted
window is at most the one record whose commit a rebalance may refuse. What it consumed
and committed is kept for the test to check. Time bounds here only stop a hang; they
never judge speed.
"""

from __future__ import annotations

import asyncio
import faulthandler
import logging
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from kafka.protocol.consumer import OffsetFetchRequest

from epochlog.client import Consumer, OffsetAndEpoch, Producer, TopicPartition
from epochlog.client.connection import BrokerConnection
from epochlog.seams.real import SocketNetwork
from support.clients import confluent_producer

PARTITIONS = 6
HANG_GUARD_S = 120.0
log = logging.getLogger(__name__)
KINDS = ("epochlog", "confluent", "kafka-python")

# (partition, offset, leader epoch) of one consumed record.
Consumed = tuple[int, int, int | None]


class GroupMember(threading.Thread):
    """One group member polling on its own thread until ``stop``. ``conf`` adds settings
    of epochlog's Consumer; the other clients get the same group settings in their own
    spelling."""

    def __init__(
        self,
        kind: str,
        bootstrap: str,
        group: str,
        topic: str,
        name: str,
        *,
        commit_each_record: bool = False,
        **conf: Any,
    ) -> None:
        assert kind in KINDS, kind
        super().__init__(name=name, daemon=True)
        self.kind, self.bootstrap, self.group, self.topic = kind, bootstrap, group, topic
        self.commit_each_record = commit_each_record
        self.conf = conf
        self.consumed: list[Consumed] = []
        self.assigned: set[int] = set()
        self.errors: list[BaseException] = []
        self.commit_errors: list[str] = []
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.client: Any = None

    # -- client specifics ------------------------------------------------------------

    def _open(self) -> Any:
        common = {
            "bootstrap.servers": self.bootstrap,
            "group.id": self.group,
            "client.id": self.name,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 10000,
            "heartbeat.interval.ms": 300,
        }
        if self.kind == "epochlog":
            consumer = Consumer({**common, "retry.backoff.ms": 20, **self.conf})
        elif self.kind == "confluent":
            import confluent_kafka as ck

            consumer = ck.Consumer({**common, "partition.assignment.strategy": "range"})
        else:
            from kafka import KafkaConsumer

            consumer = KafkaConsumer(**{k.replace(".", "_"): v for k, v in common.items()})
            # Topic metadata first: a kafka-python 3.0 leader that joined before it had
            # the topic's metadata assigns nothing and rejoins at once, which made the
            # dropped join of _rejoin_if_join_dropped likelier (seen 1 run in ~10 with
            # group.initial.rebalance.delay.ms=0).
            assert consumer.partitions_for_topic(self.topic), f"no metadata for {self.topic}"
        consumer.subscribe([self.topic])
        return consumer

    def _poll(self, consumer: Any) -> tuple[list[Consumed], Any]:
        """The records one poll returned, and the poll's own answer."""
        if self.kind == "epochlog":
            records = consumer.poll(0.1)
            return [(r.partition, r.offset, r.leader_epoch) for r in records], records
        if self.kind == "confluent":
            got = []
            for m in consumer.consume(100, 0.1):
                if m.error() is None:
                    got.append((m.partition(), m.offset(), m.leader_epoch()))
            return got, None
        batches = consumer.poll(timeout_ms=100, max_records=100)
        _rejoin_if_join_dropped(consumer._coordinator)
        return [(m.partition, m.offset, m.leader_epoch) for b in batches.values() for m in b], None

    def _commit(self, consumer: Any, got: Sequence[Consumed], answer: Any) -> None:
        """Commit the position after the last of ``got`` in each partition, with the
        epoch of that record (epochlog: the positions its poll answer hands back)."""
        last = {p: (o + 1, e) for p, o, e in got}
        try:
            if self.kind == "epochlog":
                if answer is not None:
                    consumer.commit(answer.next_offsets())
                else:
                    consumer.commit(
                        {
                            TopicPartition(self.topic, p): OffsetAndEpoch(*at)
                            for p, at in last.items()
                        }
                    )
            elif self.kind == "confluent":
                import confluent_kafka as ck

                offsets = [
                    ck.TopicPartition(self.topic, p, o, leader_epoch=-1 if e is None else e)
                    for p, (o, e) in last.items()
                ]
                consumer.commit(offsets=offsets, asynchronous=False)
            else:
                from kafka import TopicPartition as KafkaTopicPartition
                from kafka.structs import OffsetAndMetadata

                consumer.commit(
                    {
                        KafkaTopicPartition(self.topic, p): OffsetAndMetadata(o, "", e)
                        for p, (o, e) in last.items()
                    }
                )
        except Exception as exc:  # a rebalance may refuse one commit: that is the window
            self.commit_errors.append(repr(exc))

    # -- the thread --------------------------------------------------------------------

    def run(self) -> None:
        try:
            consumer = self.client = self._open()
        except BaseException as exc:
            self.errors.append(exc)
            return
        try:
            while not self.stopping.is_set():
                got, answer = self._poll(consumer)
                if self.commit_each_record:
                    for record in got:
                        with self.lock:
                            self.consumed.append(record)
                        self._commit(consumer, [record], None)
                elif got:
                    with self.lock:
                        self.consumed.extend(got)
                    self._commit(consumer, got, answer)
                with self.lock:
                    self.assigned = {tp.partition for tp in consumer.assignment()}
        except BaseException as exc:
            self.errors.append(exc)
        finally:
            consumer.close()

    def describe(self) -> str:
        """The member's state for a failure report; for kafka-python also its group
        coordinator's state and each connection's requests in flight, read from its
        internals without their locks (a report only, never a check)."""
        state = (
            f"{self.name}: alive={self.is_alive()} assigned={sorted(self.assigned)} "
            f"consumed={len(self.consumed)} errors={self.errors!r}"
        )
        if self.kind != "kafka-python" or self.client is None:
            return state
        try:
            coordinator = self.client._coordinator
            join = coordinator._join_task
            state += (
                f" [coordinator state={coordinator.state} {coordinator._generation}"
                f" rejoin_needed={coordinator.rejoin_needed} rejoining={coordinator.rejoining}"
                f" join_task={'none' if join is None else 'done' if join.is_done else 'pending'}"
                f" heartbeat_enabled={coordinator._heartbeat_enabled}"
            )
            now = time.monotonic()
            for node, conn in list(self.client._manager._conns.items()):
                in_flight = [
                    (entry[0], round(now - entry[2], 1)) for entry in list(conn.in_flight_requests)
                ]
                state += (
                    f"; conn {node}: connected={conn.connected} paused={conn.paused}"
                    f" in_flight(correlation id, age s)={in_flight}"
                    f" buffered={len(conn._request_buffer)}"
                )
            state += "]"
        except Exception as exc:  # internals of another version: the report goes on
            state += f" [internals unreadable: {exc!r}]"
        return state

    def stop(self) -> None:
        self.stopping.set()
        self.join(HANG_GUARD_S)
        assert not self.is_alive(), f"{self.name} did not stop"
        assert not self.errors, f"{self.name} failed: {self.errors}"


def _rejoin_if_join_dropped(coordinator: Any) -> None:
    """Work around a kafka-python 3.0.12 bug that stalled a member now and then: a poll
    whose timeout ends before its JoinGroup/SyncGroup round trip leaves the join task
    running; the leader's assignment then refreshes its metadata snapshot, so
    ``need_rejoin()`` turns False, and later polls skip the join loop: the finished
    task's assignment is never applied, the member stays REBALANCING with heartbeats
    off, and the broker times its session out. Asking for a rejoin makes the next poll
    join afresh. (Seen in a failure report: rejoin_needed=False rejoining=True
    join_task=done heartbeat_enabled=False.)"""
    join = coordinator._join_task
    finished = join is not None and join.is_done
    if coordinator.rejoining and finished and not coordinator.need_rejoin():
        log.warning("kafka-python dropped a finished join (3.0.12 bug); asking to rejoin")
        coordinator.request_rejoin()


def wait_for(
    predicate: Callable[[], bool],
    what: str,
    members: Sequence[GroupMember] = (),
    timeout: float = HANG_GUARD_S,
) -> None:
    """Wait for ``predicate``; a member whose thread failed ends the wait at once, and
    a timeout names every member's state, so a failure says which client stalled, and
    prints every thread's stack (captured stderr): where a stalled member sits."""
    deadline = time.monotonic() + timeout
    while not predicate():
        failed = [m for m in members if m.errors]
        if failed or time.monotonic() > deadline:
            states = "; ".join(m.describe() for m in members)
            if not failed:
                # File descriptor 2 itself: pytest captures it ("Captured stderr").
                faulthandler.dump_traceback(file=sys.__stderr__, all_threads=True)
            raise AssertionError(
                f"{'failed' if failed else 'timed out'} waiting for {what}: {states}"
            )
        time.sleep(0.05)


def stop_all(members: Sequence[GroupMember]) -> None:
    """Ask every member to stop, then wait for each: for a test's ``finally``."""
    for m in members:
        m.stopping.set()
    for m in members:
        m.join(HANG_GUARD_S)


# -- records in and views of what the members read -------------------------------------


def produce(
    bootstrap: str, topic: str, per_partition: int, phase: int, client: str = "epochlog"
) -> None:
    """``per_partition`` records ``phase-partition-i`` to every partition, through
    epochlog's Producer or confluent-kafka's, all acknowledged."""
    values = [
        (p, f"{phase}-{p}-{i}".encode()) for p in range(PARTITIONS) for i in range(per_partition)
    ]
    if client == "confluent":
        producer = confluent_producer(bootstrap)
        for p, value in values:
            producer.produce(topic, value=value, partition=p)
        assert producer.flush(HANG_GUARD_S) == 0
        return
    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 0}) as epochlog_producer:
        futures = [epochlog_producer.send(topic, value, partition=p) for p, value in values]
        assert epochlog_producer.flush(HANG_GUARD_S)
        for f in futures:
            f.result(HANG_GUARD_S)


def spread(members: Sequence[GroupMember]) -> list[int]:
    """How many partitions each member owns, sorted: [2, 2, 2] for a balanced trio."""
    return sorted(len(m.assigned) for m in members)


def total(members: Sequence[GroupMember]) -> int:
    return sum(len(m.consumed) for m in members)


def distinct(members: Sequence[GroupMember]) -> set[tuple[int, int]]:
    """The (partition, offset) pairs read by any member."""
    return {(p, o) for m in members for p, o, _ in m.consumed}


def counted(members: Sequence[GroupMember]) -> Counter[tuple[int, int]]:
    """How often each (partition, offset) was read, over all members."""
    return Counter((p, o) for m in members for p, o, _ in m.consumed)


# -- committed positions -------------------------------------------------------------


def committed(bootstrap: str, group: str, topic: str) -> dict[TopicPartition, Any]:
    """The group's committed positions as epochlog's Consumer reads them."""
    with Consumer({"bootstrap.servers": bootstrap, "group.id": group}) as reader:
        return reader.committed([TopicPartition(topic, p) for p in range(PARTITIONS)])


def offset_fetch(port: int, group: str, version: int = 8) -> dict[int, tuple[int, int]]:
    """partition -> (committed offset, committed leader epoch), through OffsetFetch
    ``version`` straight to the broker at ``port``."""

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
