"""A live stream of events produced with epochlog's Producer at acks=1.

acks=1 is the point: the leader acknowledges a record as soon as it is in its own
log, so an unclean election really loses records their producer was told were
written. Every event carries a unique id, which is how the demo later tells which
events survived, which were lost (and quarantined) and which the pipeline wrote."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from epochlog.client import Producer, RecordMetadata

USERS = 12
# Events are produced in small bursts every TICK_S seconds to keep the rate steady.
TICK_S = 0.05


def event_value(event_id: str, user: str, amount: int) -> bytes:
    return json.dumps(
        {"id": event_id, "user": user, "amount": amount, "produced_at": int(time.time() * 1000)}
    ).encode()


@dataclass
class Acked:
    """What the producer was told: event id -> (partition, offset), and failures."""

    written: dict[str, tuple[int, int]] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)


class EventStream:
    """Produces ``rate`` events per second on a thread until stopped."""

    def __init__(self, client: Mapping[str, str], topic: str, rate: int, run_id: str) -> None:
        self.topic = topic
        self.rate = rate
        self.run_id = run_id
        self.sent = 0
        self.acked = Acked()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._go = threading.Event()
        self._go.set()
        self._idle = threading.Event()
        self._producer = Producer(
            {
                **client,
                "client.id": "epochlog-demo",
                "acks": "1",
                "linger.ms": 5,
                # The unclean election takes a few seconds: unanswered records are
                # retried to the new leader meanwhile.
                "delivery.timeout.ms": 120000,
                "metadata.max.age.ms": 2000,
            }
        )
        self._thread = threading.Thread(target=self._run, name="demo-events", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def counts(self) -> tuple[int, int, int]:
        """(sent, acknowledged, failed) so far."""
        with self._lock:
            return self.sent, len(self.acked.written), len(self.acked.failed)

    def _on_delivery(self, event_id: str) -> object:
        def done(error: BaseException | None, meta: RecordMetadata | None) -> None:
            with self._lock:
                if error is not None or meta is None:
                    self.acked.failed[event_id] = repr(error)
                else:
                    self.acked.written[event_id] = (meta.partition, meta.offset)

        return done

    def hold(self, flush_bound_s: float = 60.0) -> None:
        """Stop producing for a while; returns once every record sent is answered."""
        self._go.clear()
        self._idle.clear()
        self._idle.wait(5)
        self._producer.flush(flush_bound_s)

    def resume(self) -> None:
        self._go.set()

    def _run(self) -> None:
        per_tick = max(1, round(self.rate * TICK_S))
        next_tick = time.monotonic()
        while not self._stop.is_set():
            if not self._go.is_set():
                self._idle.set()
                self._go.wait(0.2)
                next_tick = time.monotonic()
                continue
            self._idle.clear()
            for _ in range(per_tick):
                seq = self.sent
                event_id = f"{self.run_id}-{seq:07d}"
                user = f"user-{seq % USERS:02d}"
                self._producer.produce(
                    self.topic,
                    event_value(event_id, user, 1 + seq % 100),
                    key=user.encode(),
                    on_delivery=self._on_delivery(event_id),  # type: ignore[arg-type]
                )
                with self._lock:
                    self.sent += 1
            next_tick += TICK_S
            self._stop.wait(max(0.0, next_tick - time.monotonic()))

    def stop(self, flush_bound_s: float = 120.0) -> None:
        """Stop producing and wait until every record sent has its answer (once)."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._thread.join(30)
        if not self._producer.flush(flush_bound_s):
            print(f"producer: not every record was answered within {flush_bound_s:.0f} s")
        try:
            self._producer.close()
        except Exception as exc:  # noqa: BLE001 - every answer is in; say it, go on
            print(f"producer: close failed after the flush: {exc!r}", flush=True)
