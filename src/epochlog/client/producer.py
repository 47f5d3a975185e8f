"""AsyncProducer: batches per partition (``linger.ms``, ``batch.size``), compression,
acks 0/1/all, idempotence by default (one producer id, a sequence per partition: see
producer_id.py, which also renews the id when a sequence is lost) and retries that keep
order: a partition has at most one batch in flight, and a failed batch is sent again,
with the same sequence, before any later one. A record larger than
``max.request.size`` is refused when sent; one for a topic not in the metadata yet
waits apart (awaiting_metadata.py) and never holds up the records behind it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Mapping
from typing import Any

from epochlog.client.awaiting_metadata import RecordsAwaitingMetadata
from epochlog.client.client_metrics import ProducerCounts
from epochlog.client.config import producer_config
from epochlog.client.enqueue_order import EnqueueOrder
from epochlog.client.errors import DeliveryError, TopicPartition
from epochlog.client.last_batch import LastBatch
from epochlog.client.metadata import Cluster, backoff_seconds
from epochlog.client.partitioner import Partitioner
from epochlog.client.produce_batch import (
    BATCH_OVERHEAD,
    RECORD_OVERHEAD,
    RecordHeaders,
    RecordMetadata,
    RecordTooLargeError,
    _Batch,
    check_sizes,
    enqueue,
)
from epochlog.client.producer_bulk import BulkSends, Headers
from epochlog.client.producer_id import FIRST_PRODUCER_ID, ProducerIds
from epochlog.client.record_future import HeldRecord, RecordFuture
from epochlog.client.security import client_network
from epochlog.client.transactions import TransactionalApi, TransactionManager
from epochlog.protocol.column_rows import RecordLists
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.produce_request import EncodedProduce
from epochlog.protocol.records import build_batch_view
from epochlog.seams import Seams
from epochlog.seams.tasks import BackgroundTasks
from epochlog.seams.waiting import wait_event, with_timeout

log = logging.getLogger("epochlog.client.producer")

PRODUCE_VERSION = 9
# The leader lost what it acknowledged of our sequences (an unclean truncation).
SEQUENCE_ERRORS = {ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, ErrorCode.UNKNOWN_PRODUCER_ID}
RETRIABLE = {
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.REQUEST_TIMED_OUT,
    ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ErrorCode.NETWORK_EXCEPTION,
    ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH,
}
# Errors that mean this client's view of the leader is wrong.
METADATA_ERRORS = RETRIABLE - {ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NOT_ENOUGH_REPLICAS}


class AsyncProducer(BulkSends, TransactionalApi):
    """Kafka's producer on asyncio. ``await send(...)`` enqueues a record and returns a
    future of its RecordMetadata; ``flush()`` waits until all are answered."""

    def __init__(self, config: Mapping[str, object], seams: Seams) -> None:
        self.config = producer_config(config)
        self._seams = seams
        self._clock = self._seams.clock
        self._time_ns = self._clock.time_ns  # bound once: a record's stamp (RecordLists.stamps_ns)
        c = self.config
        self._cluster = Cluster(
            client_network(c, seams),
            self._clock,
            c["bootstrap.servers"],
            c["client.id"],
            c["retry.backoff.ms"],
            c["retry.backoff.max.ms"],
            c["request.timeout.ms"],
            auto_create_topics=True,  # the broker's auto.create.topics.enable decides
        )
        self._partition_counts = self._cluster.cache.partition_counts  # (updated in place)
        self._last = LastBatch(c["batch.size"])
        self._cluster.cache.on_count_change = self._last.forget
        self._partitioner = Partitioner(c["partitioner"], self._seams.random)
        self._queues: dict[TopicPartition, deque[_Batch]] = {}
        # Per topic, by partition: (its TopicPartition, its queue), for send()'s hot path.
        self._slots: dict[str, list[tuple[TopicPartition, deque[_Batch]] | None]] = {}
        self._in_flight: set[TopicPartition] = set()
        self._awaiting = RecordsAwaitingMetadata()
        self._producer_ids = ProducerIds(self._cluster, self._clock, c, RETRIABLE)
        self._txn = (
            TransactionManager(self._cluster, self._clock, c, self._producer_ids)
            if c["transactional.id"] is not None
            else None
        )
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._flushing = 0
        self._refresh_needed = False
        self._sender: asyncio.Task[None] | None = None
        self._closed = False
        self._tasks = BackgroundTasks()
        # Sends are enqueued in call order even when they wait for metadata (FIFO lock).
        self._enqueue_order = EnqueueOrder(self._last.forget)
        self._batch_size: int = c["batch.size"]
        self._batch_filled = False  # send() then yields to the loop: the batch can go
        self._max_request_size: int = c["max.request.size"]
        self._batch_room = min(self._batch_size, self._max_request_size - BATCH_OVERHEAD)
        self.counts = ProducerCounts()  # metrics(): Producer in sync.py

    async def _start(self) -> None:
        if self._sender is None:
            if self._txn is not None:
                self._txn.check_send()
            elif self.config["enable.idempotence"]:
                # Asked by the sender before it seals anything: send() never waits for
                # it, and records expire by delivery.timeout.ms if no broker answers.
                self._producer_ids.renewal = FIRST_PRODUCER_ID
            self._loop = asyncio.get_running_loop()
            self._sender = self._loop.create_task(self._run())

    async def partitions_for(self, topic: str) -> int:
        """Partition count of ``topic``, waiting for its metadata if needed."""
        count = self._cluster.cache.partition_count(topic)
        if count is None:
            await self._cluster.wait_for_topics([topic], self.config["request.timeout.ms"] / 1000)
            count = self._cluster.cache.partition_count(topic)
            assert count is not None
        return count

    async def send(
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        partition: int | None = None,
        headers: Headers | None = None,
        timestamp: int | None = None,
    ) -> RecordFuture[RecordMetadata]:
        """Enqueue one record; the returned future (an asyncio future to asyncio, see
        record_future) completes when it is acknowledged. Records are enqueued in the
        order of the calls. A send yields to the loop once its batch has grown by
        ``TURN_BYTES`` or is full, and when its record finds the batch full: a loop of
        sends that awaits nothing else lets batches go and be answered as they fill."""
        if headers is not None:
            headers = tuple(headers)  # read once, here: an iterator would be used up
        if self._txn is not None:
            self._txn.check_send()
        last = self._last
        if (
            topic == last.topic
            and partition == last.partition
            and headers is None
            and timestamp is None
            and (key is None or partition is not None)
        ):
            batch: _Batch = last.batch  # type: ignore[assignment]
            size = batch.size + RECORD_OVERHEAD + (len(value) if value else 0)
            if key:
                size += len(key)
            # (Outcomes None: something else answers the batch's last record.)
            outcomes = batch.outcomes
            if batch.open and outcomes is not None and size <= self._batch_room:
                records: RecordLists = last.records  # type: ignore[assignment]
                values = records.values  # RecordLists.append, inline: no call a record
                values.append(value)
                records.stamps_ns.append(self._time_ns())
                if key is not None:
                    records.set_key(key)
                batch.size = size
                if size >= last.turn_at:
                    future = RecordFuture((outcomes, len(values) - 1))
                    if last.turned():
                        self._wake.set()
                    await self._clock.sleep(0)
                    return future
                return RecordFuture((outcomes, len(values) - 1))
        # partitions_now, inline: this is the path of every record sent one by one.
        if (
            self._sender is not None
            and not self._enqueue_order.busy
            and topic not in self._awaiting
            and (count := self._partition_counts.get(topic)) is not None
        ):
            # (_add answers None only to a caller that brings its own waiter.)
            future: RecordFuture[RecordMetadata] = self._add(  # type: ignore[assignment]
                topic, value, key, partition, headers, timestamp, count, None
            )
            if self._batch_filled:
                self._batch_filled = False
                await self._clock.sleep(0)
            return future
        async with self._enqueue_order:  # (which makes send forget its last batch)
            if self._closed:
                raise RuntimeError("producer is closed")
            await self._start()
            count = self._cluster.cache.partition_count(topic)
            if count is None or topic in self._awaiting:
                # Placed by the sender once the topic's metadata comes: never waited for
                # here, so that the records behind it are not held up.
                check_sizes(topic, [value], [key], [headers], self._max_request_size)
                self._refresh_needed = True
                self._idle.clear()
                self._wake.set()
                now = self._clock.monotonic()
                held = HeldRecord[RecordMetadata](self._loop)
                self._awaiting.hold(topic, value, key, partition, headers, timestamp, now, held)
                return held.future(0)
            return self._add(  # type: ignore[return-value]
                topic, value, key, partition, headers, timestamp, count, None
            )

    def partitions_now(self, topic: str) -> int | None:
        """The topic's partition count if a record for it is appended without waiting
        (the sender started, the metadata known, nobody queued ahead); else None."""
        if self._sender is None or self._enqueue_order.busy or topic in self._awaiting:
            return None
        return self._partition_counts.get(topic)

    def append_now(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None,
        partition: int | None,
        headers: Headers | None,
        timestamp: int | None,
        waiter: Any,
    ) -> bool:
        """``send`` without a coroutine or a future of its own, for a caller on the
        loop that brings its waiter (``done``/``set_result``/``set_exception``, as the
        sync Producer's DeliveryFuture has), when ``partitions_now``. False: ``send``."""
        if self._txn is not None:
            self._txn.check_send()
        count = self.partitions_now(topic)
        if count is None:
            return False
        self._add(topic, value, key, partition, headers, timestamp, count, waiter)
        return True

    def _add(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None,
        partition: int | None,
        headers: Headers | None,
        timestamp: int | None,
        count: int,
        waiter: Any,
    ) -> RecordFuture[RecordMetadata] | None:
        """Append one record to its partition's open batch. ``waiter`` (see
        ``append_now``) is answered there; without one, the record's future."""
        if self._closed:
            raise RuntimeError("producer is closed")
        asked = partition
        if partition is None:
            partition = self._partitioner.partition(topic, key, count)
        elif not 0 <= partition < count:
            raise ValueError(f"partition {partition} of {topic}, which has {count}")
        slots = self._slots.get(topic)
        if slots is None or len(slots) <= partition:
            slots = self._slots[topic] = [None] * count
        slot = slots[partition]
        if slot is None:
            tp = TopicPartition(topic, partition)
            slot = slots[partition] = (tp, self._queues.setdefault(tp, deque()))
        tp, queue = slot
        size = RECORD_OVERHEAD + (len(key) if key else 0) + (len(value) if value else 0)
        hdrs: RecordHeaders = ()
        if headers:
            hdrs = tuple([(k, v) for k, v in headers])
            size += sum(len(k.encode()) + len(v or b"") for k, v in hdrs)
        if size + BATCH_OVERHEAD > self._max_request_size:
            raise RecordTooLargeError(tp, size + BATCH_OVERHEAD, self._max_request_size)
        batch = queue[-1] if queue and queue[-1].open else None
        # (A batch's size is above 0 once it has a record.)
        if batch is None or (batch.size and batch.size + size > self._batch_room):
            # An open batch without room for the record is full: send() lets it go.
            self._batch_filled = batch is not None
            batch = _Batch(tp, self._clock.monotonic())
            enqueue(queue, batch)
            self._idle.clear()  # (a record joining a queued batch finds it clear)
        given_timestamp = timestamp
        if timestamp is None:
            timestamp = self._time_ns() // 1_000_000
        records: RecordLists = batch.records  # type: ignore[assignment]
        records.append(key, value, hdrs, timestamp)
        batch.size += size
        index = len(records.values) - 1
        if index == 0 or len(queue) > 1 or batch.size >= self._batch_size:
            # A new batch (the sender must learn when its linger ends) or a full one.
            self._wake.set()
        if waiter is not None:
            batch.wait(index, waiter)
            return None
        outcomes = batch.send_outcomes(index, self._loop)
        if (
            headers is None
            and given_timestamp is None
            and (asked is not None or (key is None and self._partitioner.null_keys_stay))
            and not self._enqueue_order.busy  # (not from the slow path: others may queue)
        ):
            self._last.remember(topic, asked, batch)
        return RecordFuture((outcomes, index))

    async def send_and_wait(self, topic: str, value: bytes | None = None, **kw: Any) -> Any:
        return await (await self.send(topic, value, **kw))

    async def flush(self, timeout: float | None = None) -> bool:
        """Send everything now and wait for every answer; False if ``timeout`` passed."""
        async with self._enqueue_order:  # sends waiting for metadata are enqueued first
            pass
        self._flushing += 1
        self._wake.set()
        try:
            if timeout is None:
                await self._idle.wait()
                return True
            return await wait_event(self._clock, self._idle, timeout)
        finally:
            self._flushing -= 1

    async def close(self) -> None:
        if self._closed:
            return
        await self.flush(self.config["delivery.timeout.ms"] / 1000)
        self._closed = True
        self._last.forget()
        if self._sender is not None:
            self._sender.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sender
        self._tasks.cancel()
        self._awaiting.fail_all("producer closed")
        for queue in self._queues.values():
            for batch in queue:
                batch.fail(DeliveryError(batch.tp, "producer closed"))
        await self._clock.sleep(0)  # their callbacks, from the loop, before close returns
        await self._cluster.close()

    # -- the sender ------------------------------------------------------------------

    def _pending(self) -> bool:
        return any(self._queues.values()) or bool(self._in_flight) or bool(self._awaiting)

    def _check_idle(self) -> None:
        if not self._pending():
            self._idle.set()

    def _ready(self, now: float) -> tuple[dict[int, list[_Batch]], float | None]:
        """Batches to send now grouped by leader, and when the next one will be ready."""
        linger = self.config["linger.ms"] / 1000
        by_leader: dict[int, list[_Batch]] = {}
        next_at: float | None = None
        for tp, queue in self._queues.items():
            if not queue or tp in self._in_flight:
                continue
            batch = queue[0]
            ready_at = max(batch.retry_at, batch.created + linger)
            full = len(queue) > 1 or batch.size >= self.config["batch.size"]
            if batch.attempts == 0 and (full or self._flushing):
                ready_at = batch.retry_at
            if ready_at > now:
                next_at = ready_at if next_at is None else min(next_at, ready_at)
                continue
            meta = self._cluster.cache.partition(tp)
            if meta is None or meta.leader < 0:
                self._refresh_needed = True
                next_at = now + self.config["retry.backoff.ms"] / 1000
                continue
            by_leader.setdefault(meta.leader, []).append(batch)
        return by_leader, next_at

    async def _run(self) -> None:
        attempt = 0
        while True:
            if self._producer_ids.renewal is not None:
                self._check_idle()  # a flush waits for records, not for the renewal
                try:
                    # Short tries, so that records expire on time while no broker answers.
                    await self._producer_ids.renew(self.config["retry.backoff.max.ms"] / 1000)
                except Exception as exc:  # keep the sender alive; retried after backoff
                    log.warning("InitProducerId failed: %s", exc)
                    self._expire(self._clock.monotonic())
                    self._check_idle()
                    await self._clock.sleep(
                        backoff_seconds(attempt, self.config["retry.backoff.ms"], 1000)
                    )
                    attempt += 1
                    continue
            if self._refresh_needed:
                self._refresh_needed = False
                try:
                    topics = {tp.topic for tp in self._queues} | {*self._awaiting}
                    await self._cluster.refresh(topics)
                    attempt = 0
                except Exception as exc:  # keep the sender alive; batches time out
                    log.warning("metadata refresh failed: %s", exc)
                    self._refresh_needed = True
                    await self._clock.sleep(
                        backoff_seconds(attempt, self.config["retry.backoff.ms"], 1000)
                    )
                    attempt += 1
            now = self._clock.monotonic()
            self._expire(now)
            # Placed before batches are picked: they may go in this round.
            waiting = bool(self._awaiting) and self._awaiting.place(
                self._cluster.cache.partition_count, self._add
            )
            by_leader, next_at = self._ready(now)
            if waiting:
                self._refresh_needed = True  # asked again after a backoff
                retry_at = now + self.config["retry.backoff.ms"] / 1000
                next_at = retry_at if next_at is None else min(next_at, retry_at)
            if self._txn is not None and by_leader:
                by_leader = await self._added_to_transaction(by_leader)
            for leader, batches in by_leader.items():
                for b in batches:
                    self._in_flight.add(b.tp)
                self._tasks.spawn(self._send_to(leader, batches))
            self._check_idle()
            self._wake.clear()
            wait = None if next_at is None else max(0.0, next_at - self._clock.monotonic())
            if wait is None:
                await self._wake.wait()
            else:
                await wait_event(self._clock, self._wake, wait)

    def _expire(self, now: float) -> None:
        timeout = self.config["delivery.timeout.ms"] / 1000
        self.counts.records_failed += self._awaiting.expire(now, timeout)
        for tp, queue in self._queues.items():
            while queue and tp not in self._in_flight and now - queue[0].created > timeout:
                self._fail(queue[0], DeliveryError(tp, f"not delivered within {timeout}s"))

    def _sealed(self, batch: _Batch) -> bool:
        """Encode a batch once (retries resend it); False if it cannot be: it failed."""
        if batch.payload is not None:
            return True
        pid, epoch = self._producer_ids.stamp(batch)
        self._last.forget()  # the sticky partitioner may move on
        try:
            batch.open = False
            batch.payload = build_batch_view(
                batch.records,
                compression=self.config["compression.codec"],
                producer_id=pid,
                producer_epoch=epoch,
                base_sequence=batch.base_sequence,
                is_transactional=self._txn is not None,
            )
        except Exception as exc:
            self._in_flight.discard(batch.tp)
            self._fail(batch, DeliveryError(batch.tp, f"a record cannot be encoded: {exc!r}"))
            if pid >= 0 and self._txn is None:  # the sequences it took are spent
                self._producer_ids.need_new(batch, "a batch could not be encoded")
            self._wake.set()
            return False
        if batch.records[0][0] is None:
            self._partitioner.batch_sent(batch.tp.topic, batch.tp.partition)
        return True

    async def _send_to(self, leader: int, batches: list[_Batch]) -> None:
        acks = self.config["acks"]
        if not (batches := [b for b in batches if self._sealed(b)]):  # a str value, say
            return
        by_topic: dict[str, list[_Batch]] = {}
        for b in batches:
            by_topic.setdefault(b.tp.topic, []).append(b)
        request = EncodedProduce(
            None if self._txn is None else self._txn.transactional_id,
            acks,
            self.config["request.timeout.ms"],
            [
                (topic, [(b.tp.partition, b.payload) for b in group])
                for topic, group in by_topic.items()
            ],
        )
        answers: dict[TopicPartition, Any] = {}
        failure: str | None = None
        try:
            conn = await self._cluster.broker(leader)
            response = await with_timeout(
                self._clock,
                conn.send(request, PRODUCE_VERSION, expect_response=acks != 0),
                self._cluster.request_timeout_s + self.config["request.timeout.ms"] / 1000,
            )
            if response is not None:
                for t in response.responses:
                    for p in t.partition_responses:
                        answers[TopicPartition(t.name, p.index)] = p
        except (ConnectionError, OSError, TimeoutError) as exc:
            failure = f"request to broker {leader} failed: {exc}"
            await self._cluster.drop(leader)
            self._refresh_needed = True
        except Exception as exc:  # a bug or a bad record: fail the batches, never hang
            log.exception("produce to broker %d failed", leader)
            for b in batches:
                self._in_flight.discard(b.tp)
                self._fail(b, DeliveryError(b.tp, f"produce failed: {exc!r}"))
            self._wake.set()
            return
        for b in batches:
            self._in_flight.discard(b.tp)
            if failure is not None:
                self._retry_or_fail(b, failure, None)
            elif acks == 0:
                self._complete(b, -1)
            else:
                p = answers.get(b.tp)
                code = ErrorCode(p.error_code) if p is not None else ErrorCode.NETWORK_EXCEPTION
                if code == ErrorCode.NONE:
                    self._complete(b, p.base_offset, p.log_append_time_ms)
                elif code in RETRIABLE:
                    if code in METADATA_ERRORS:
                        self._refresh_needed = True
                    self._retry_or_fail(b, (p.error_message if p else None) or code.name, code)
                elif code in SEQUENCE_ERRORS and b.producer[0] >= 0 and self._txn is None:
                    # Refused, so not written: send it again under a new producer id.
                    reason = p.error_message or code.name
                    self._producer_ids.need_new(b, reason)  # the sender is woken below
                    b.payload, b.base_sequence, b.producer = None, -1, (-1, -1)
                    self._retry_or_fail(b, reason, code)
                else:
                    self._fail(b, DeliveryError(b.tp, (p.error_message or code.name), code))
        self._check_idle()  # the sender may be busy renewing the producer id
        self._wake.set()

    def _fail(self, batch: _Batch, error: DeliveryError) -> None:
        """The head batch of its partition fails for good. If it was sealed with a
        sequence, the sequences after it would never be accepted: renew the id."""
        self._queues[batch.tp].popleft()
        self.counts.records_failed += len(batch.records)
        batch.fail(error)
        if self._txn is not None:
            # Inside a transaction a lost record means the transaction must be aborted
            # (the abort starts a new epoch, so no sequence gap remains).
            self._txn.abortable(str(error), error.code)
            return
        sealed = batch.payload is not None and batch.base_sequence >= 0
        if sealed and self._producer_ids.need_new(batch, f"a batch failed ({error})"):
            self._wake.set()

    def _complete(self, batch: _Batch, base_offset: int, append_time: int = -1) -> None:
        self._queues[batch.tp].popleft()
        self.counts.records_sent += len(batch.records)
        batch.complete(base_offset, append_time)

    def _retry_or_fail(self, batch: _Batch, reason: str, code: ErrorCode | None) -> None:
        batch.attempts += 1
        now = self._clock.monotonic()
        delay = backoff_seconds(
            batch.attempts - 1, self.config["retry.backoff.ms"], self.config["retry.backoff.max.ms"]
        )
        timeout = self.config["delivery.timeout.ms"] / 1000
        if batch.attempts > self.config["retries"] or now + delay - batch.created > timeout:
            self._fail(
                batch, DeliveryError(batch.tp, f"{reason} (after {batch.attempts} tries)", code)
            )
            return
        log.info("retrying %s in %.3fs: %s", batch.tp, delay, reason)
        batch.retry_at = now + delay
