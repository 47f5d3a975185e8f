"""The chaos run's workload, in the host namespace, recording the history the checkers
judge: two idempotent acks=all producers of unique values (``checkers.value_of(i)``,
even i through confluent-kafka, odd i through epochlog's own, each acknowledged or
failed in its delivery callback), epochlog's consumer of every partition with
``auto.offset.reset`` none (every poll's records, every truncation it reports with its
divergence offset), ListOffsets asked now and then (KIP-207), and the leader epochs the
epochlog clients hold (KIP-232).

Polling, ListOffsets and the final read are the simulator's own (``sim/run.py``) on the
real Clock: one way of recording a history, whichever world it runs in.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from confluent_kafka import KafkaError as LibrdkafkaError
from confluent_kafka import Message, Producer

from epochlog.client.admin import AsyncAdmin
from epochlog.client.consumer import AsyncConsumer
from epochlog.client.errors import ClientError
from epochlog.client.producer import AsyncProducer
from epochlog.protocol.errors import KafkaError
from epochlog.seams.real import real_seams
from epochlog.sim import checkers
from epochlog.sim.recording import (
    ask_list_offsets,
    client_epochs,
    poll_into,
    read_back,
    record_ack,
)

TOPIC = "chaos"
# How often the leader epochs the clients hold are sampled, in seconds.
EPOCHS_EVERY_S = 0.1
# After the faults, how long the cluster may take to have every replica back in every
# ISR, and the producer to deliver what it still holds.
SETTLE_S = 120.0
# How long closing epochlog's producer may wait for what it still holds (only a run cut
# short has anything left: a settled one has delivered everything).
CLOSE_S = 10.0


class Workload:
    """Produce at ``rate`` records a second and consume everything, into ``history``."""

    def __init__(self, bootstrap: str, partitions: int, rate: int, log_path: str) -> None:
        self.partitions = [(TOPIC, p) for p in range(partitions)]
        self.rate = rate
        self.history: list[checkers.Event] = []
        self.seams = real_seams()
        config = {"bootstrap.servers": bootstrap}
        self.admin = AsyncAdmin(config, self.seams)
        self.consumer = AsyncConsumer({**config, "auto.offset.reset": "none"}, self.seams)
        # librdkafka's own lines (every broker a fault cuts off) go to a file, not the
        # terminal where the run's steps and table are printed.
        librdkafka = logging.getLogger("epochlog.chaos.librdkafka")
        librdkafka.propagate = False
        self._log_file = logging.FileHandler(log_path)
        librdkafka.addHandler(self._log_file)
        self.producer = Producer(
            {
                "logger": librdkafka,
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                # Retried through every fault: a record fails only if a fault outlasts it.
                "message.timeout.ms": 300_000,
            }
        )
        self.epochlog_producer = AsyncProducer(
            {**config, "acks": "all", "linger.ms": 5, "delivery.timeout.ms": 300_000}, self.seams
        )
        self.sent = 0

    def note(self, seconds: float, what: str) -> None:
        """A nemesis step, in the history where it happened (the checkers skip it)."""
        self.history.append(("nemesis", round(seconds, 3), what))

    async def create_topic(self) -> None:
        await self.admin.create_topic(TOPIC, partitions=len(self.partitions), replication_factor=3)
        self.consumer.assign(self.partitions)
        for tp in self.partitions:
            self.consumer.seek(tp, 0)

    async def run(self, until: Callable[[], bool]) -> None:
        """Produce and consume until ``until()`` says the faults are over."""
        lists = ask_list_offsets(self.seams.clock, self.admin, self.partitions, self.history)
        watchers = [asyncio.ensure_future(lists), asyncio.ensure_future(self._sample_epochs())]
        started = time.monotonic()
        try:
            while not until():
                due = int((time.monotonic() - started) * self.rate)
                while self.sent < due:
                    try:
                        await self._produce(self.sent)
                    except BufferError:
                        break
                    self.sent += 1
                self.producer.poll(0)
                await poll_into(self.consumer, self.history, 50)
        finally:
            for watcher in watchers:
                watcher.cancel()
            await asyncio.gather(*watchers, return_exceptions=True)

    async def _produce(self, i: int) -> None:
        value, key = checkers.value_of(i), b"k%d" % i
        if i % 2:
            future = await self.epochlog_producer.send(TOPIC, value, key=key)
            future.add_done_callback(lambda f: record_ack(self.history, i, f))
            return

        def delivered(error: LibrdkafkaError | None, message: Message) -> None:
            if error is None:
                self.history.append(("ack", i, message.partition(), message.offset()))
            else:
                self.history.append(("failed", i, error.name()))

        self.producer.produce(TOPIC, value, key=key, on_delivery=delivered)

    async def _sample_epochs(self) -> None:
        clients = {
            "consumer": self.consumer,
            "admin": self.admin,
            "producer": self.epochlog_producer,
        }
        held: dict[tuple[str, str], int] = {}
        while True:
            await asyncio.sleep(EPOCHS_EVERY_S)
            for key, epoch in client_epochs(clients):  # type: ignore[arg-type]
                if held.get(key) != epoch:
                    held[key] = epoch
                    self.history.append(("client-epoch", *key, epoch))

    async def settle(self) -> str:
        """Wait until every partition has a leader and every replica in its ISR, and the
        producer has delivered everything; says how that went."""
        deadline = time.monotonic() + SETTLE_S
        state = "no answer"
        while time.monotonic() < deadline:
            try:
                info = (await self.admin.describe_cluster([TOPIC])).topics[TOPIC]
                state = ", ".join(f"{p.partition}: leader {p.leader} isr {p.isr}"
                                  for p in info.partitions)  # fmt: skip
                if all(p.leader >= 0 and len(p.isr) == 3 for p in info.partitions):
                    break
            except (ClientError, KafkaError, OSError) as exc:
                state = f"{type(exc).__name__}: {exc}"
            await asyncio.sleep(0.5)
        else:
            return f"not settled after {SETTLE_S:.0f} s ({state})"
        left = await asyncio.to_thread(self.producer.flush, max(1.0, deadline - time.monotonic()))
        flushed = await self.epochlog_producer.flush(max(1.0, deadline - time.monotonic()))
        return (
            f"settled ({state}); {left} records undelivered by confluent-kafka, "
            f"epochlog's producer {'flushed' if flushed else 'NOT flushed'}"
        )

    async def read_back(self) -> None:
        """The live consumer catches up, then every partition is read from 0 (final)."""
        await read_back(self.seams.clock, self.consumer, self.admin, self.partitions, self.history)

    async def close(self) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.epochlog_producer.close(), CLOSE_S)
        self.producer.close()
        logging.getLogger("epochlog.chaos.librdkafka").removeHandler(self._log_file)
        self._log_file.close()
        await self.consumer.close()
        await self.admin.close()
