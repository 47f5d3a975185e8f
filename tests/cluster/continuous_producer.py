"""A confluent-kafka producer that keeps producing from a thread while a test breaks the
cluster, recording every delivery report (offset or error) by record key."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import confluent_kafka as ck

from support.records import Got

# At most this many records produced and not yet reported, so a stop drains quickly.
MAX_IN_FLIGHT = 2000
STOP_BOUND_S = 120.0


@dataclass(frozen=True)
class Delivery:
    key: bytes
    offset: int
    error: str | None
    # time.monotonic() when the report reached the test.
    at: float


def key_of(index: int) -> bytes:
    return b"k%07d" % index


class ContinuousProducer:
    """Idempotent acks=all producer of keys k0000000, k0000001, ... until stopped."""

    def __init__(self, bootstrap: str, topic: str, partition: int = 0, **conf: object) -> None:
        settings: dict[str, object] = {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            # Notice a dead leader quickly; the retries themselves are unbounded in time
            # up to message.timeout.ms (5 minutes), longer than any test waits.
            "socket.connection.setup.timeout.ms": 2000,
            "topic.metadata.refresh.interval.ms": 1000,
        }
        settings.update({k.replace("_", "."): v for k, v in conf.items()})
        self._producer = ck.Producer(settings)
        self._topic = topic
        self._partition = partition
        self._lock = threading.Lock()
        self._reports: list[Delivery] = []
        self._produced = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="continuous-producer", daemon=True)
        self._failure: BaseException | None = None

    def start(self) -> ContinuousProducer:
        self._thread.start()
        return self

    def _report(self, err: ck.KafkaError | None, msg: ck.Message) -> None:
        delivery = Delivery(
            msg.key(),
            msg.offset() if err is None else -1,
            None if err is None else str(err),
            time.monotonic(),
        )
        with self._lock:
            self._reports.append(delivery)

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                with self._lock:
                    in_flight = self._produced - len(self._reports)
                if in_flight >= MAX_IN_FLIGHT:
                    self._producer.poll(0.01)
                    continue
                try:
                    self._producer.produce(
                        self._topic,
                        key=key_of(self._produced),
                        value=b"value-%d" % self._produced,
                        partition=self._partition,
                        on_delivery=self._report,
                    )
                except BufferError:
                    self._producer.poll(0.01)
                    continue
                with self._lock:
                    self._produced += 1
                self._producer.poll(0)
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            self._failure = exc

    def stop(self) -> list[Delivery]:
        """Stop producing, wait for every report; returns all reports in arrival order."""
        self._stop.set()
        self._thread.join(STOP_BOUND_S)
        assert not self._thread.is_alive(), "producer thread did not stop"
        if self._failure is not None:
            raise AssertionError(f"producer thread failed: {self._failure!r}")
        left = self._producer.flush(STOP_BOUND_S)
        assert left == 0, f"{left} records still without a delivery report"
        with self._lock:
            return list(self._reports)

    def acked(self) -> int:
        with self._lock:
            return sum(1 for d in self._reports if d.error is None)

    def reports(self) -> list[Delivery]:
        with self._lock:
            return list(self._reports)


def check_log_holds_exactly_the_acknowledged(
    reports: Sequence[Delivery], got: Sequence[Got]
) -> None:
    """No delivery failed, each key was reported once, and the log read back from its
    start holds every acknowledged record at its acknowledged offset, once, and
    nothing else (offsets dense from 0)."""
    errors = [d for d in reports if d.error is not None]
    assert not errors, f"{len(errors)} delivery errors, first: {errors[:3]}"
    acked = {d.key: d.offset for d in reports}
    assert len(acked) == len(reports), "a key was reported twice"
    counts = Counter(g.key for g in got)
    duplicated = [k for k, n in counts.items() if n > 1]
    assert not duplicated, f"{len(duplicated)} keys stored twice, first: {duplicated[:3]}"
    by_offset = {g.offset: g.key for g in got}
    lost = [(k, o) for k, o in acked.items() if by_offset.get(o) != k]
    assert not lost, (
        f"{len(lost)} of {len(acked)} acknowledged records are not at their acknowledged"
        f" offset, first: {sorted(lost, key=lambda x: x[1])[:3]}"
    )
    assert sorted(by_offset) == list(range(len(got)))
    assert len(got) == len(acked)
