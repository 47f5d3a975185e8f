"""The producer's bulk sends, many records of one topic in one call: ``send_many``
(Python sequences, one future for the call) and ``send_columns`` (records held as
columns, the Spark sink's Arrow batches: no Python object per record). They enqueue
into the same batches, in the same order, as ``send`` would; AsyncProducer's sender
sends them alike."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from epochlog.client.awaiting_metadata import RecordsAwaitingMetadata
from epochlog.client.batch_fill import fill_batches, fill_column_batches
from epochlog.client.enqueue_order import EnqueueOrder
from epochlog.client.errors import TopicPartition
from epochlog.client.metadata import Cluster
from epochlog.client.partitioner import Partitioner
from epochlog.client.produce_batch import (
    SendManyResult,
    _Batch,
    check_send_columns,
    check_send_many,
    check_sizes,
)
from epochlog.client.transactions import TransactionManager
from epochlog.protocol.column_rows import BinaryColumn
from epochlog.seams import Clock

Headers = Iterable[tuple[str, bytes | None]]


class BulkSends:
    """``send_many`` and ``send_columns`` of AsyncProducer (kept apart so the producer
    module stays readable)."""

    # What AsyncProducer provides.
    _txn: TransactionManager | None
    _cluster: Cluster
    _partitioner: Partitioner
    _queues: dict[TopicPartition, deque[_Batch]]
    _awaiting: RecordsAwaitingMetadata
    _enqueue_order: EnqueueOrder
    _sender: asyncio.Task[None] | None
    _closed: bool
    _clock: Clock
    _idle: asyncio.Event
    _wake: asyncio.Event
    _max_request_size: int
    _batch_room: int
    _start: Callable[[], Any]
    _add: Callable[..., Any]
    partitions_for: Callable[[str], Any]

    async def send_many(
        self,
        topic: str,
        values: Sequence[bytes | None],
        keys: Sequence[bytes | None] | None = None,
        partition: int | Sequence[int | None] | None = None,
        headers: Sequence[Headers | None] | None = None,
        timestamps: Sequence[int | None] | None = None,
    ) -> SendManyResult:
        """Enqueue many records of one topic in one call, as consecutive ``send`` calls
        would (same order, partitioning, batching, retries and errors), without a future
        per record: the result's ``future`` completes when all are acknowledged.

        ``keys``, ``headers``, ``timestamps`` and a sequence ``partition`` are per record
        (same length as ``values``); an int ``partition`` applies to all. A record over
        ``max.request.size`` raises RecordTooLargeError before anything is enqueued."""
        lengths = check_send_many(
            topic, values, keys, partition, headers, timestamps, self._max_request_size
        )
        count = await self._count_for_many(topic)
        return self._add_many(topic, values, keys, partition, headers, timestamps, count, lengths)

    async def send_columns(
        self,
        topic: str,
        values: BinaryColumn,
        keys: BinaryColumn | None = None,
        partitions: np.ndarray | None = None,
    ) -> SendManyResult:
        """``send_many`` for records held as columns (the Spark sink's Arrow batches):
        the same order, partitioning, retries and errors, with no Python object made per
        record; records are stamped now and have no headers. ``partitions`` holds a
        partition per record, or -1 for the partitioner's choice. The batches filled
        take no later records (they hold row numbers, not records): a caller hands over
        many rows a call."""
        check_send_columns(topic, values, keys, partitions, self._max_request_size)
        count = await self._count_for_many(topic)
        if self._closed:
            raise RuntimeError("producer is closed")
        rows = len(values)
        chosen = self._partitioner.column_partitions(topic, rows, keys, partitions, count)
        result = SendManyResult(asyncio.get_running_loop().create_future())
        if not rows:
            result.future.set_result(result)
            return result
        room = self._batch_room
        fill_column_batches(result, self._queues, topic, values, keys, chosen, self._clock, room)
        self._idle.clear()
        self._wake.set()
        return result

    async def _count_for_many(self, topic: str) -> int:
        """The topic's partition count, once records for it can be enqueued in bulk: the
        sender started, and records waiting for the topic's metadata placed first."""
        if self._txn is not None:
            self._txn.check_send()
        count = self._cluster.cache.partition_count(topic)
        if self._sender is None or self._enqueue_order.busy or count is None:
            async with self._enqueue_order:
                if self._closed:
                    raise RuntimeError("producer is closed")
                await self._start()
                count = await self.partitions_for(topic)
        if topic in self._awaiting:
            self._awaiting.place(self._cluster.cache.partition_count, self._add)
        return count

    def _add_many(
        self,
        topic: str,
        values: Sequence[bytes | None],
        keys: Sequence[bytes | None] | None,
        partition: int | Sequence[int | None] | None,
        headers: Sequence[Headers | None] | None,
        timestamps: Sequence[int | None] | None,
        count: int,
        lengths: np.ndarray | None,
    ) -> SendManyResult:
        """``_add`` for many records, with what it looks up per record hoisted out of the
        loop. Everything is checked first, so nothing is enqueued when anything is wrong."""
        if self._closed:
            raise RuntimeError("producer is closed")
        fixed = partition if isinstance(partition, int) else None
        chosen = None if partition is None or fixed is not None else partition
        for p in [fixed] if fixed is not None else chosen or ():
            if p is not None and not 0 <= p < count:
                raise ValueError(f"partition {p} of {topic}, which has {count}")
        if keys is not None or headers is not None:
            check_sizes(topic, values, keys, headers, self._max_request_size)
        result = SendManyResult(asyncio.get_running_loop().create_future())
        if not values:
            result.future.set_result(result)
            return result
        if partition is None and keys is not None:
            chosen = self._partitioner.partitions(topic, keys, count)
        fill_batches(
            result,
            self._queues,
            topic,
            values,
            keys,
            fixed,
            chosen,
            headers,
            timestamps,
            count,
            self._partitioner.partition,
            self._clock,
            self._batch_room,
            lengths,
        )
        self._idle.clear()
        self._wake.set()
        return result
