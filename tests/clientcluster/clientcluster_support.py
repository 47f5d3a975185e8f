"""Helpers for driving epochlog's consumer against a real cluster: an AsyncConsumer on
a private event-loop thread (so a test can poll in the background while it pauses or
resumes brokers, and look at a partition's phase), reading with hang guards, the
consumer's log lines, and the OS's view of a paused broker's unread requests."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import threading
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from cluster_harness import Cluster

from epochlog.client import (
    AsyncConsumer,
    ConsumerRecord,
    ConsumerRecords,
    OffsetAndEpoch,
    Producer,
    TopicPartition,
)
from epochlog.client.positions import Phase
from epochlog.seams.real import real_seams
from support.broker import wait_until

T = TypeVar("T")
# Hang guards: generous bounds on waits, never judgements of speed.
READ_BOUND_S = 120.0
CALL_BOUND_S = 180.0


class LoopConsumer:
    """An AsyncConsumer on its own loop thread. ``poll`` blocks; ``submit`` runs any
    coroutine over the consumer in the background and hands back a Future."""

    def __init__(self, config: Mapping[str, object]) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

        async def make() -> AsyncConsumer:
            return AsyncConsumer(config, real_seams())

        self.consumer = self._run(make())

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(CALL_BOUND_S)

    def submit(self, job: Callable[[AsyncConsumer], Coroutine[Any, Any, T]]) -> Future[T]:
        return asyncio.run_coroutine_threadsafe(job(self.consumer), self.loop)

    def call(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on the loop thread (the consumer is not thread-safe)."""

        async def run() -> T:
            return fn()

        return self._run(run())

    def assign(self, tps: Iterable[TopicPartition]) -> None:
        self.call(lambda: self.consumer.assign(list(tps)))

    def seek(self, tp: TopicPartition, offset: int, epoch: int | None = None) -> None:
        self.call(lambda: self.consumer.seek(tp, offset, epoch))

    def position(self, tp: TopicPartition) -> OffsetAndEpoch | None:
        return self.call(lambda: self.consumer.position(tp))

    def phase(self, tp: TopicPartition) -> Phase:
        return self.call(lambda: self.consumer.phase(tp))

    def poll(self, timeout_s: float = 0.5) -> ConsumerRecords:
        return self._run(self.consumer.poll(int(timeout_s * 1000)))

    def close(self) -> None:
        try:
            self._run(self.consumer.close())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(30)


def wait_for(predicate: Callable[[], object], timeout: float, what: str) -> None:
    """``wait_until`` for predicates that ask a cluster in motion: a request error or an
    answer not yet complete (a replica or a topic not yet there) counts as "not yet"."""

    def settled() -> object:
        try:
            return predicate()
        except (AssertionError, OSError, IndexError, KeyError):
            return False

    wait_until(settled, timeout, what)


def read(consumer: LoopConsumer, count: int, bound_s: float = READ_BOUND_S) -> list[ConsumerRecord]:
    """Poll until ``count`` records (exactly: more is a failure) or the hang guard."""
    got: list[ConsumerRecord] = []
    deadline = time.monotonic() + bound_s
    while len(got) < count and time.monotonic() < deadline:
        got.extend(consumer.poll(0.5))
    assert len(got) == count, f"read {len(got)} of {count}: {got}"
    return got


def raised(
    consumer: LoopConsumer, error: type[BaseException], bound_s: float = READ_BOUND_S
) -> Any:
    """Poll until ``error`` is raised; any record read before it is a failure."""
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline:
        try:
            records = consumer.poll(0.5)
        except error as exc:
            return exc
        assert not records, f"records read where {error.__name__} was due: {records}"
    raise AssertionError(f"no {error.__name__} within {bound_s}s")


def produce(
    bootstrap: str, topic: str, records: list[tuple[bytes, bytes, int]], partition: int = 0
) -> list[int]:
    """(key, value, timestamp) records in one batch, acks=all; their offsets."""
    with Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 50, "enable.idempotence": False}
    ) as producer:
        futures = [
            producer.send(topic, value, key, partition, timestamp=ts) for key, value, ts in records
        ]
        assert producer.flush(CALL_BOUND_S)
        return [f.result(CALL_BOUND_S).offset for f in futures]


def keyed(records: Iterable[ConsumerRecord]) -> list[tuple[int, bytes | None, int | None]]:
    """(offset, key, leader epoch) of each record: what a reset-table check compares."""
    return [(r.offset, r.key, r.leader_epoch) for r in records]


class LogLines(logging.Handler):
    """Every line the client logs while installed (the module's tests share a cluster
    story, so pytest's function-scoped caplog cannot span it)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self._lock_lines = threading.Lock()
        self._logger = logging.getLogger("epochlog.client")
        self._level = self._logger.level

    def emit(self, record: logging.LogRecord) -> None:
        with self._lock_lines:
            self.lines.append(record.getMessage())

    def __enter__(self) -> LogLines:
        self._logger.addHandler(self)
        self._logger.setLevel(logging.DEBUG)
        return self

    def __exit__(self, *exc: object) -> None:
        self._logger.removeHandler(self)
        self._logger.setLevel(self._level)

    def about(self, tp: TopicPartition) -> list[str]:
        prefix = f"{tp}:"
        with self._lock_lines:
            return [line for line in self.lines if line.startswith(prefix) or f" {tp} " in line]


def unread_requests(port: int) -> int:
    """Connections to ``port`` on loopback whose receive queue holds unread bytes: the
    requests a SIGSTOPped broker has not read (from /proc/net/tcp, the kernel's view)."""
    count = 0
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, state, queues = fields[1], fields[3], fields[4]
        rx_queue = int(queues.split(":")[1], 16)
        if state == "01" and int(local.split(":")[1], 16) == port and rx_queue > 0:
            count += 1
    return count


@dataclass(frozen=True)
class Held:
    """One replica's view of one offset: the record's key and the epoch it was written in."""

    key: bytes | None
    epoch: int


def first_difference(
    read: Mapping[int, Held], leader_log: Mapping[int, Held], position: int
) -> int | None:
    """The first offset below ``position`` where what the consumer read differs from
    the new leader's log (missing there counts as different): the divergence offset."""
    for offset in sorted(o for o in read if o < position):
        if leader_log.get(offset) != read[offset]:
            return offset
    return None


@dataclass
class Roles:
    """Broker ids by role: ``controller`` has the highest port, ``first`` the lowest
    (the broker the client asks first), ``middle`` the other one."""

    cluster: Cluster
    controller: int
    first: int
    middle: int


def start_ordered(
    base: Path,
    metastore: str | None = None,
    prepare: Callable[[Roles], None] | None = None,
    **settings: str,
) -> Roles:
    """Start three brokers, the highest port first so that it is the controller;
    ``prepare`` may change a broker's settings once the roles are known."""
    cluster = Cluster(base, metastore or f"sqlite://{base}/metastore.db", 3, settings)
    by_port = sorted(cluster.brokers, key=lambda b: b.port)
    first, middle, controller = (b.broker_id for b in by_port)
    roles = Roles(cluster, controller, first, middle)
    if prepare is not None:
        prepare(roles)
    try:
        cluster.brokers[controller].start()
        wait_until(lambda: cluster.controller_id() == controller, 60, "the first controller")
        cluster.brokers[middle].start()
        cluster.brokers[first].start()
        cluster.wait_for_brokers()
    except BaseException:
        cluster.close()
        raise
    return roles


class HoldingProxy:
    """A TCP forwarder on loopback that can stop passing bytes both ways: a real
    network partition between one broker and its metastore (the broker keeps serving
    clients from what it knew)."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._open = threading.Event()
        self._open.set()
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept_loop, daemon=True).start()

    def hold(self) -> None:
        self._open.clear()

    def release(self) -> None:
        self._open.set()

    def _accept_loop(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port), 30)
            except OSError:
                client.close()
                continue
            self._sockets += [client, upstream]
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                self._open.wait()
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._open.set()
        self._listener.close()
        for s in self._sockets:
            s.close()
