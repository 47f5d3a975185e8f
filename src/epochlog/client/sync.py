"""Synchronous ``Producer``, ``Consumer`` and ``Admin`` over the asyncio core, for
scripts and Spark executors: each runs its own event loop on a private thread, and so
real I/O and time (the real seams; a simulation drives the asyncio core directly)."""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import threading
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, TypeVar

import pyarrow as pa

from epochlog.client.admin import AsyncAdmin
from epochlog.client.consumer import AsyncConsumer, ConsumerRecords, OffsetAndEpoch
from epochlog.client.delivery import Deliveries, DeliveryFuture
from epochlog.client.errors import TopicPartition
from epochlog.client.lookup import OffsetAndTimestamp
from epochlog.client.produce_batch import RecordMetadata, SendManyResult
from epochlog.client.producer import AsyncProducer, Headers
from epochlog.client.transactions import GroupMetadata, PreparedTransaction
from epochlog.seams.real import real_seams
from epochlog.seams.waiting import finished_within

T = TypeVar("T")
log = logging.getLogger("epochlog.client.sync")
DeliveryCallback = Callable[[BaseException | None, RecordMetadata | None], None]


class _LoopThread:
    """An event loop on a daemon thread; coroutines are run on it and awaited here."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()


async def _call(fn: Callable[[], T]) -> T:
    """Run a plain call on the client's loop thread (it touches loop-owned state)."""
    return fn()


class _SyncClient:
    """An asyncio client living on a private loop thread, its calls made synchronous."""

    _thread: _LoopThread
    _client: Any

    def _start(self, name: str, make: Callable[[], Any]) -> None:
        """Build the async client on its own loop (it binds to the loop it is made on)."""
        self._thread = _LoopThread(name)
        try:
            self._client = self._thread.run(_call(make))
        except BaseException:
            self._thread.stop()
            raise

    def close(self) -> None:
        try:
            self._thread.run(self._client.close())
        finally:
            self._thread.stop()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Producer(_SyncClient):
    """confluent-kafka-like: ``produce`` with an ``on_delivery`` callback, ``flush``;
    kafka-python-like ``send``, which returns a future per record.

    Both only append to a hand-off queue; one drain task on the producer's loop moves
    every waiting record into the AsyncProducer, so a burst of records costs one thread
    wake-up, not one per record, and call order is kept. A run of ``produce`` calls for
    one topic goes in as one ``send_many``, and its callbacks are called batch by batch
    as its batches are answered: no object per record on the way in."""

    def __init__(self, config: Mapping[str, object]) -> None:
        # What produce(), send() and produce_batch() hand over, in call order: _STRIDE
        # slots an entry, flat. A produce() adds its entry with one list.extend, which
        # the GIL makes atomic: no lock a record, no object a record.
        self._queue: list[Any] = []
        # send() and produce_batch() entries in the queue (their records are counted in
        # the deliveries already); changed under the deliveries' lock.
        self._queued_items = 0
        self._drain_lock = threading.Lock()
        self._draining = False
        self._drain_task: asyncio.Task[None] | None = None
        self._seams = real_seams()
        self._start("epochlog-producer", lambda: AsyncProducer(config, self._seams))
        self._producer: AsyncProducer = self._client
        self._deliveries = Deliveries(self._producer.config["queue.buffering.max.messages"])

    def metrics(self) -> dict[str, int]:
        """Records acknowledged and failed (``client_metrics.py``), read without a call
        into the producer's loop, so they answer even while a flush waits there."""
        return self._producer.counts.as_dict()

    def produce(
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        partition: int | None = None,
        headers: Headers | None = None,
        timestamp: int | None = None,
        on_delivery: DeliveryCallback | None = None,
    ) -> None:
        """Enqueue a record, as confluent-kafka's ``produce``: ``on_delivery(error,
        metadata)`` runs on the producer's thread when it is answered, exactly once
        (delivered or failed). BufferError if the queue is full."""
        if headers is not None:
            headers = tuple(headers)  # read once, here: an iterator would be used up
        queue, deliveries = self._queue, self._deliveries
        # Without the lock: the drain counts records in before it takes their entries
        # out, and the queue is read first, so this can count some twice (and the exact
        # check decides), never miss one.
        if len(queue) // _STRIDE + deliveries.taken - deliveries.settled >= deliveries.limit:
            self._enqueue_if_room(topic, value, on_delivery, key, partition, headers, timestamp)
        else:
            queue.extend((topic, value, on_delivery, key, partition, headers, timestamp))
        if not self._draining:
            self._wake_drain()

    def _enqueue_if_room(self, *entry: Any) -> None:
        """A produce() entry, its room checked exactly (under the lock): BufferError if
        the queue is full. Threads producing at once, each checking without the lock
        before it adds, can each pass the limit by the record it adds."""
        with self._deliveries.lock:
            queued = len(self._queue) // _STRIDE - self._queued_items
            self._deliveries.check_room_locked(1, queued)
            self._queue.extend(entry)

    def send(
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        partition: int | None = None,
        headers: Headers | None = None,
        timestamp: int | None = None,
    ) -> DeliveryFuture[RecordMetadata]:
        """Enqueue a record, as kafka-python's ``send``: its future gives the record's
        RecordMetadata or its error. BufferError if the queue is full."""
        self._deliveries.take_room(1)
        done: DeliveryFuture[RecordMetadata] = DeliveryFuture(self._deliveries, 1)
        self._hand_off(_Handoff(topic, value, key, partition, headers, timestamp, done))
        return done

    def produce_batch(
        self,
        topic: str,
        values: Sequence[bytes | None],
        keys: Sequence[bytes | None] | None = None,
        partition: int | Sequence[int | None] | None = None,
        headers: Sequence[Headers | None] | None = None,
        timestamps: Sequence[int | None] | None = None,
    ) -> DeliveryFuture[SendManyResult]:
        """Enqueue many records of one topic, in order with ``produce`` calls, through
        ``AsyncProducer.send_many``: one hand-off and one future for all of them. The
        future's result indexes each record's RecordMetadata; it fails with the first
        error (a refusal at send time means none was enqueued)."""
        self._deliveries.take_room(len(values))
        done: DeliveryFuture[SendManyResult] = DeliveryFuture(self._deliveries, len(values))
        self._hand_off(_BatchHandoff(topic, values, keys, partition, headers, timestamps, done))
        return done

    def _hand_off(self, item: _Handoff | _BatchHandoff) -> None:
        """Queue for the producer's thread; wake its drain unless one is running. A
        running drain looks at the queue again after it lowers its flag, so the flag is
        read without the lock: no lock per record shared with the loop thread."""
        with self._deliveries.lock:
            self._queue.extend((item, *_NO_FIELDS))
            self._queued_items += 1
        if not self._draining:
            self._wake_drain()

    def _wake_drain(self) -> None:
        with self._drain_lock:
            start = not self._draining
            self._draining = True
        if start:
            self._thread.loop.call_soon_threadsafe(self._start_drain)

    async def _send_batch(self, item: _BatchHandoff) -> None:
        try:
            result = await self._producer.send_many(
                item.topic, item.values, item.keys, item.partition, item.headers, item.timestamps
            )
        except Exception as exc:
            item.done.set_exception(exc)
            return
        result.future.add_done_callback(functools.partial(_answer, item.done))

    def _start_drain(self) -> None:
        self._drain_task = self._thread.loop.create_task(self._drain())

    async def _drain(self) -> None:
        queue = self._queue
        while True:
            while queue:
                await self._send_entries(self._take_queued())
            self._draining = False
            if not queue:  # a record queued before the flag fell is seen here
                return
            with self._drain_lock:
                if self._draining:  # ... unless its produce() started a drain of its own
                    return
                self._draining = True

    def _take_queued(self) -> list[Any]:
        """Every entry queued so far, out of the queue; their produce() records counted
        against ``queue.buffering.max.messages`` first (see produce)."""
        queue, deliveries = self._queue, self._deliveries
        with deliveries.lock:
            entries = queue[:]
            deliveries.taken += len(entries) // _STRIDE - self._queued_items
            self._queued_items = 0
            del queue[: len(entries)]
        return entries

    async def _send_entries(self, entries: list[Any]) -> None:
        """Queued entries in order: each run of produce() records for one topic as one
        send_many, each send() and produce_batch() as it came."""
        topics = entries[_TOPIC::_STRIDE]
        n, start = len(topics), 0
        while start < n:
            topic = topics[start]
            if type(topic) is _BatchHandoff:
                await self._send_batch(topic)
                start += 1
                continue
            if type(topic) is _Handoff:
                await self._send_one(topic)
                start += 1
                continue
            end = n if start == 0 and topics.count(topic) == n else start + 1
            while end < n and type(topics[end]) is str and topics[end] == topic:
                end += 1
            await self._send_run(topic, entries[start * _STRIDE : end * _STRIDE])
            start = end

    async def _send_one(self, item: _Handoff) -> None:
        try:  # the record's future is its batch's waiter: no coroutine, no task
            placed = self._producer.append_now(
                item.topic, item.value, item.key, item.partition, item.headers,
                item.timestamp, item.done,
            )  # fmt: skip
        except Exception as exc:  # refused at send time (max.request.size)
            item.done.set_exception(exc)
            return
        if not placed:
            await self._send(item)

    async def _send_run(self, topic: str, entries: list[Any]) -> None:
        """Consecutive ``produce`` calls for one topic, enqueued as one ``send_many`` when
        nothing needs waiting for; otherwise (the producer starting, the topic's metadata
        to come, a record refused at send time) each as ``send`` enqueues it."""
        values, callbacks = entries[_VALUE::_STRIDE], entries[_CALLBACK::_STRIDE]
        fields = [entries[slot::_STRIDE] for slot in _FIELDS]
        if self._producer.partitions_now(topic) is not None:
            try:
                result = await self._producer.send_many(topic, values, *_run_fields(fields))
            except Exception:  # noqa: BLE001 - each record is tried alone, and so answered
                pass
            else:
                result.on_batch = functools.partial(self._delivered, result, callbacks)
                result.future.add_done_callback(_retrieved)  # outcomes go out per batch
                return
        keys, partitions, headers, timestamps = fields
        for i, callback in enumerate(callbacks):
            done: DeliveryFuture[RecordMetadata] = DeliveryFuture(self._deliveries, 1, callback)
            record = (values[i], keys[i], partitions[i], headers[i], timestamps[i])
            await self._send(_Handoff(topic, *record, done))

    def _delivered(
        self,
        result: SendManyResult,
        callbacks: list[DeliveryCallback | None],
        batch: Any,
        positions: Sequence[int],
    ) -> None:
        """Callbacks of a run's records in a batch just answered, on the loop thread: in
        each partition's order, as the batches are answered."""
        result.call_back(batch, positions, callbacks)
        self._deliveries.answered(len(positions))

    async def _send(self, item: _Handoff) -> None:
        """A record that must wait (the producer starting, its topic's metadata)."""
        try:  # a refusal at send time (max.request.size) reaches the callback too
            fut = await self._producer.send(
                item.topic, item.value, item.key, item.partition, item.headers, item.timestamp
            )
        except Exception as exc:
            item.done.set_exception(exc)
            return
        fut.add_done_callback(functools.partial(_answer, item.done))

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every record produced before the call is answered; False if
        ``timeout`` seconds passed first (the rest stay queued, answered later)."""

        async def flush() -> bool:
            clock = self._seams.clock
            deadline = None if timeout is None else clock.monotonic() + timeout
            drain = self._drain_task  # records handed over before this call
            if drain is not None and not drain.done():
                if deadline is None:
                    await asyncio.shield(drain)
                elif not await finished_within(clock, drain, timeout or 0.0):
                    return False
            left = None if deadline is None else max(0.0, deadline - clock.monotonic())
            return await self._producer.flush(left)

        return self._thread.run(flush())

    def close(self) -> None:
        try:  # records still in the hand-off queue first; the rest fail as not delivered
            self.flush(self._producer.config["delivery.timeout.ms"] / 1000)
        finally:
            super().close()

    # -- transactions (AsyncProducer's, after the records handed over before the call) --

    def _after_handoff(self, call: Callable[[], Coroutine[Any, Any, T]]) -> T:
        async def run() -> T:
            if self._drain_task is not None:
                await asyncio.shield(self._drain_task)
            return await call()

        return self._thread.run(run())

    def init_transactions(self, timeout: float | None = None) -> None:
        self._thread.run(self._producer.init_transactions(timeout))

    def begin_transaction(self) -> None:
        self._after_handoff(self._producer.begin_transaction)

    def send_offsets_to_transaction(
        self,
        offsets: Mapping[TopicPartition, Any],
        group_metadata: GroupMetadata,
        timeout: float | None = None,
    ) -> None:
        self._after_handoff(
            lambda: self._producer.send_offsets_to_transaction(offsets, group_metadata, timeout)
        )

    def commit_transaction(self, timeout: float | None = None) -> None:
        self._after_handoff(lambda: self._producer.commit_transaction(timeout))

    def abort_transaction(self, timeout: float | None = None) -> None:
        self._after_handoff(lambda: self._producer.abort_transaction(timeout))

    def prepare_transaction(self, timeout: float | None = None) -> PreparedTransaction:
        return self._after_handoff(lambda: self._producer.prepare_transaction(timeout))

    def complete_transaction(
        self, prepared: PreparedTransaction, commit: bool, timeout: float | None = None
    ) -> None:
        self._thread.run(self._producer.complete_transaction(prepared, commit, timeout))


@dataclass(slots=True)
class _BatchHandoff:
    """One ``produce_batch`` call on its way to the loop."""

    topic: str
    values: Sequence[bytes | None]
    keys: Sequence[bytes | None] | None
    partition: int | Sequence[int | None] | None
    headers: Sequence[Headers | None] | None
    timestamps: Sequence[int | None] | None
    done: DeliveryFuture[SendManyResult]


@dataclass(slots=True)
class _Handoff:
    """One ``produce`` call on its way from the caller's thread to the loop."""

    topic: str
    value: bytes | None
    key: bytes | None
    partition: int | None
    headers: Headers | None
    timestamp: int | None
    done: DeliveryFuture[RecordMetadata]


# A produce() entry's slots in the hand-off queue. A send() or produce_batch() entry holds
# its _Handoff or _BatchHandoff where a produce() entry holds its topic, then nothing.
_TOPIC, _VALUE, _CALLBACK, _KEY, _PARTITION, _HEADERS, _TIMESTAMP = range(7)
_STRIDE = 7
_FIELDS = (_KEY, _PARTITION, _HEADERS, _TIMESTAMP)
_NO_FIELDS = (None,) * (_STRIDE - 1)


def _run_fields(fields: list[list[Any]]) -> tuple[Any, Any, Any, Any]:
    """``send_many``'s keys, partition, headers and timestamps for a run's columns of
    them: None for a column of nulls, one partition for a run that names only one."""
    keys, partitions, headers, timestamps = fields
    n, first = len(keys), partitions[0]
    return (
        None if keys.count(None) == n else keys,
        first if partitions.count(first) == n else partitions,
        None if headers.count(None) == n else headers,
        None if timestamps.count(None) == n else timestamps,
    )


def _retrieved(future: asyncio.Future[Any]) -> None:
    """Marks a future's error as seen: its records' callbacks had it already."""
    if not future.cancelled():
        future.exception()


def _answer(done: DeliveryFuture[T], fut: asyncio.Future[T]) -> None:
    """An asyncio answer passed on to the caller's thread's future."""
    if fut.cancelled():
        done.set_exception(asyncio.CancelledError())
    elif fut.exception() is not None:
        done.set_exception(fut.exception())  # type: ignore[arg-type]
    else:
        done.set_result(fut.result())


class Admin(_SyncClient):
    """Every AsyncAdmin call made synchronous: ``Admin(config).describe_groups([...])``."""

    def __init__(self, config: Mapping[str, object], *, timeout: float = 120.0) -> None:
        self._timeout = timeout
        self._start("epochlog-admin", lambda: AsyncAdmin(config, real_seams()))
        self._admin: AsyncAdmin = self._client

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._admin, name)
        if not inspect.iscoroutinefunction(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            return self._thread.run(attr(*args, **kwargs), self._timeout)

        return call


class Consumer(_SyncClient):
    """assign / seek / poll over AsyncConsumer. Every call runs on the consumer's loop
    thread: between polls that thread may be receiving the next round of fetches."""

    def __init__(self, config: Mapping[str, object]) -> None:
        self._start("epochlog-consumer", lambda: AsyncConsumer(config, real_seams()))
        self._consumer: AsyncConsumer = self._client

    def metrics(self) -> dict[str, int]:
        """Records handed out, truncations detected, resets by ``auto.offset.reset``
        (``client_metrics.py``), read without a call into the consumer's loop."""
        return self._consumer.counts.as_dict()

    def assign(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        wanted = list(partitions)
        self._thread.run(_call(lambda: self._consumer.assign(wanted)))

    def consumer_group_metadata(self) -> GroupMetadata:
        return self._thread.run(_call(self._consumer.consumer_group_metadata))

    def seek(
        self, tp: TopicPartition | tuple[str, int], offset: int, leader_epoch: int | None = None
    ) -> None:
        self._thread.run(_call(lambda: self._consumer.seek(tp, offset, leader_epoch)))

    def position(self, tp: TopicPartition | tuple[str, int]) -> OffsetAndEpoch | None:
        return self._thread.run(_call(lambda: self._consumer.position(tp)))

    def poll(self, timeout: float = 1.0) -> ConsumerRecords:
        return self._thread.run(self._consumer.poll(int(timeout * 1000)))

    def poll_arrow(self, timeout: float = 1.0) -> pa.RecordBatch:
        """``poll`` as one Arrow RecordBatch of ``ARROW_SCHEMA`` (perhaps no rows)."""
        return self._thread.run(self._consumer.poll_arrow(int(timeout * 1000)))

    def subscribe(self, topics: Iterable[str]) -> None:
        """Join ``group.id`` for these topics; heartbeats run on the consumer's thread."""
        self._thread.run(_call(lambda: self._consumer.subscribe(topics)))

    def unsubscribe(self) -> None:
        self._thread.run(self._consumer.unsubscribe())

    def assignment(self) -> list[TopicPartition]:
        return self._thread.run(_call(self._consumer.assignment))

    def commit(self, offsets: Mapping[TopicPartition, OffsetAndEpoch] | None = None) -> None:
        self._thread.run(self._consumer.commit(offsets))

    def committed(
        self, partitions: Iterable[TopicPartition | tuple[str, int]]
    ) -> dict[TopicPartition, OffsetAndEpoch | None]:
        return self._thread.run(self._consumer.committed(list(partitions)))

    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition | tuple[str, int], int]
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        return self._thread.run(self._consumer.offsets_for_times(timestamps))
