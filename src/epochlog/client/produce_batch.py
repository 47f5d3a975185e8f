"""A producer's open and in-flight batches, and what callers get back: RecordMetadata
per record, SendManyResult per ``send_many`` call (one future for many records, metadata
built only when asked for), and how records are sized against ``max.request.size``.
Apart from producer.py so it stays readable."""

from __future__ import annotations

import asyncio
import logging
from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import accumulate, repeat
from operator import add, itemgetter
from typing import Any, NamedTuple, overload

import numpy as np

from epochlog.client.errors import DeliveryError, TopicPartition
from epochlog.client.record_future import RecordOutcomes
from epochlog.protocol.column_rows import BinaryColumn, ColumnRows, RecordLists
from epochlog.protocol.errors import ErrorCode
from epochlog.seams import Clock

log = logging.getLogger("epochlog.client.producer")

# Per-record overhead beyond key, value and headers, for sizing batches.
RECORD_OVERHEAD = 20
# A record batch's header (v2), counted against max.request.size with its records.
BATCH_OVERHEAD = 61


class RecordTooLargeError(DeliveryError):
    """A record that cannot fit in one request: Kafka's MESSAGE_TOO_LARGE, raised by
    ``send`` and naming the setting to raise."""

    def __init__(self, tp: TopicPartition, size: int, limit: int) -> None:
        super().__init__(
            tp,
            f"the record is {size} bytes when serialized, larger than max.request.size ({limit})",
            ErrorCode.MESSAGE_TOO_LARGE,
        )


def check_sizes(
    topic: str,
    values: Sequence[bytes | None],
    keys: Sequence[bytes | None] | None,
    headers: Sequence[Iterable[tuple[str, bytes | None]] | None] | None,
    max_request_size: int,
) -> None:
    """Refuse the first record of a ``send_many`` that cannot fit in one request."""
    limit = max_request_size - BATCH_OVERHEAD
    for i, value in enumerate(values):
        size = RECORD_OVERHEAD + len(value or b"")
        if keys is not None:
            size += len(keys[i] or b"")
        if headers is not None and headers[i]:
            size += sum(len(k.encode()) + len(v or b"") for k, v in headers[i] or ())
        if size > limit:
            raise RecordTooLargeError(
                TopicPartition(topic, -1), size + BATCH_OVERHEAD, max_request_size
            )


def check_send_many(
    topic: str,
    values: Sequence[bytes | None],
    keys: Sequence[bytes | None] | None,
    partition: int | Sequence[int | None] | None,
    headers: Sequence[Iterable[tuple[str, bytes | None]] | None] | None,
    timestamps: Sequence[int | None] | None,
    max_request_size: int,
) -> None:
    """``send_many``'s arguments checked before anything is enqueued: one length for
    every per-record sequence, and no record over ``max.request.size`` (with keys or
    headers: by ``check_sizes`` as the records are filled in)."""
    n = len(values)
    for name, seq in (("keys", keys), ("headers", headers), ("timestamps", timestamps)):
        if seq is not None and len(seq) != n:
            raise ValueError(f"{name} has {len(seq)} items for {n} values")
    if partition is not None and not isinstance(partition, int) and len(partition) != n:
        raise ValueError(f"partition has {len(partition)} items for {n} values")
    if keys is None and headers is None and n:
        limit = max_request_size - BATCH_OVERHEAD - RECORD_OVERHEAD
        biggest = (
            max(map(len, values))
            if None not in values
            else max((len(v) for v in values if v), default=0)
        )
        if biggest > limit:
            tp = TopicPartition(topic, partition if isinstance(partition, int) else -1)
            size = biggest + RECORD_OVERHEAD + BATCH_OVERHEAD
            raise RecordTooLargeError(tp, size, max_request_size)


def check_send_columns(
    topic: str,
    values: BinaryColumn,
    keys: BinaryColumn | None,
    partitions: np.ndarray | None,
    max_request_size: int,
) -> None:
    """``check_send_many`` for ``send_columns``: one length for every column, no record
    over ``max.request.size``, no partition below -1 (the partitioner's choice)."""
    n = len(values)
    for name, column in (("keys", keys), ("partitions", partitions)):
        if column is not None and len(column) != n:
            raise ValueError(f"{name} has {len(column)} items for {n} values")
    if partitions is not None and partitions.min(initial=0) < -1:
        raise ValueError(
            f"partition {int(partitions.min())} of {topic}: a partition is 0 or more, "
            "or -1 for the partitioner's choice"
        )
    sizes = values.sizes() if keys is None else values.sizes() + keys.sizes()
    biggest = int(sizes.max(initial=0)) + RECORD_OVERHEAD + BATCH_OVERHEAD
    if biggest > max_request_size:
        raise RecordTooLargeError(TopicPartition(topic, -1), biggest, max_request_size)


class RecordMetadata(NamedTuple):
    """Where a record was stored. ``leader_epoch`` is None: Produce answers (v9) do not
    say which epoch appended it; a consumer reads it from the batch. A tuple: made for
    every delivered record, at a third of a frozen dataclass's cost."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    leader_epoch: int | None = None


# A record's headers as kept for build_batch. A tuple, not a list: a tuple of bytes and
# str holds nothing the cyclic collector has to follow, so it stops tracking it at its
# first pass; lists kept the producer's whole backlog tracked, and queueing a record
# cost 345 ns instead of 101.
RecordHeaders = tuple[tuple[str, bytes | None], ...]


@dataclass(eq=False)
class _Batch:
    tp: TopicPartition
    created: float
    records: RecordLists | ColumnRows = field(default_factory=RecordLists)
    # What else waits for a record here, and its index in records: the sync Producer's
    # DeliveryFuture (append_now), a HeldRecord placed once its topic was known. Two
    # lists, not a list of pairs, as a pair per queued record would be one more object
    # the cyclic collector walks at every full pass over the backlog.
    waiters: list[Any] = field(default_factory=list)
    waiter_indexes: list[int] = field(default_factory=list)
    # What send()'s futures of records here look at (see record_future).
    outcomes: RecordOutcomes[RecordMetadata] | None = None
    # send_many() calls with records here: one entry per call, not per record.
    bulks: list[SendManyResult] = field(default_factory=list)
    size: int = 0
    payload: bytes | None = None
    base_sequence: int = -1
    producer: tuple[int, int] = (-1, -1)
    attempts: int = 0
    retry_at: float = 0.0
    base_offset: int = -1
    append_time: int = -1
    error: BaseException | None = None

    def __post_init__(self) -> None:
        # Open for more records: held as lists (a batch filled from columns is full as
        # made) and not encoded yet. Sealing closes it for good: one unsealed again to go
        # under a new producer id takes no more. An attribute, not a method: every record
        # sent one by one reads it.
        self.open = type(self.records) is RecordLists

    def wait(self, index: int, future: Any) -> None:
        """``future`` (``done``, ``set_result``, ``set_exception``) is answered with the
        metadata of ``records[index]``."""
        self.waiters.append(future)
        self.waiter_indexes.append(index)

    def metadata(self, index: int) -> RecordMetadata:
        """Where ``records[index]`` was stored, once the batch is acknowledged."""
        return _metadata(self.tp.topic, self.tp.partition, self.base_offset, self._stamps(), index)

    def answers(self) -> Callable[[int], RecordMetadata]:
        """``metadata`` from copies of what it needs: a caller's future must not keep the
        batch's records alive."""
        return partial(
            _metadata, self.tp.topic, self.tp.partition, self.base_offset, self._stamps()
        )

    def timestamps(self) -> list[int]:
        """Each record's timestamp as stored, for a loop over many: one list, not a call
        a record."""
        stamps = self._stamps()
        return [stamps] * len(self.records) if type(stamps) is int else stamps  # type: ignore[return-value]

    def _stamps(self) -> int | list[int]:
        """The broker's append time, else each record's own (one for a column batch)."""
        if self.append_time >= 0:
            return self.append_time
        records = self.records
        return records.timestamps if type(records) is RecordLists else records.timestamp  # type: ignore[union-attr]

    def fail(self, error: BaseException) -> None:
        self.error = error
        self.open = False
        if self.outcomes is not None:
            self.outcomes.settle(error, None)
        for future in self.waiters:
            if not future.done():
                future.set_exception(error)
        for bulk in self.bulks:
            bulk._batch_failed(self, error)

    def complete(self, base_offset: int, append_time: int) -> None:
        self.base_offset, self.append_time = base_offset, append_time
        answers = self.answers()  # made once, not a metadata() call a waiter
        if self.outcomes is not None:
            self.outcomes.settle(None, answers)
        for i, future in zip(self.waiter_indexes, self.waiters, strict=True):
            if not future.done():
                future.set_result(answers(i))
        for bulk in self.bulks:
            bulk._batch_done(self)


class SendManyResult(Sequence[RecordMetadata]):
    """What ``send_many`` returns, for records in call order: ``future`` completes (with
    this object) when every record is acknowledged, or fails with the first delivery
    error. Metadata is built per record only when indexed, so a caller that only waits
    pays nothing per record."""

    def __init__(self, future: asyncio.Future[SendManyResult]) -> None:
        self.future = future
        self._batches: list[_Batch] = []
        self._indexes: list[int] = []
        self._pending = 0
        # Where this call's records went, by batch (positions in call order), and what is
        # called with them as each batch is answered: per-record outcomes go out batch by
        # batch, so in each partition's order, where ``future`` waits for them all.
        self._placed: dict[_Batch, Sequence[int]] = {}
        self.on_batch: Callable[[_Batch, Sequence[int]], None] | None = None

    def __len__(self) -> int:
        return len(self._batches)

    @overload
    def __getitem__(self, i: int) -> RecordMetadata: ...
    @overload
    def __getitem__(self, i: slice) -> list[RecordMetadata]: ...
    def __getitem__(self, i: int | slice) -> RecordMetadata | list[RecordMetadata]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if not self.future.done() or self.future.exception() is not None:
            raise RuntimeError("records not acknowledged (await .future first)")
        return self._batches[i].metadata(self._indexes[i])

    def call_back(
        self,
        batch: _Batch,
        positions: Sequence[int],
        callbacks: Sequence[Callable[[Any, Any], None] | None],
    ) -> None:
        """``callbacks[i](error, metadata)`` for the records i of this call in ``batch``,
        once answered (None: no callback); one that raises is logged, the rest still run."""
        error, indexes = batch.error, self._indexes
        if error is not None:
            for i in positions:
                _call(callbacks[i], error, None)
            return
        # batch.metadata's tuples made here: no method call a record.
        tp, base, stamps = batch.tp, batch.base_offset, batch.timestamps()
        topic, partition, make = tp.topic, tp.partition, tuple.__new__
        for i in positions:
            callback = callbacks[i]
            if callback is None:
                continue
            index = indexes[i]
            offset = base + index if base >= 0 else -1
            try:
                callback(
                    None, make(RecordMetadata, (topic, partition, offset, stamps[index], None))
                )
            except Exception:
                log.exception("on_delivery callback failed")

    def _batch_done(self, batch: _Batch) -> None:
        self._pending -= 1
        if self._pending == 0 and not self.future.done():
            self.future.set_result(self)
        self._answered(batch)

    def _batch_failed(self, batch: _Batch, error: BaseException) -> None:
        self._pending -= 1
        if not self.future.done():
            self.future.set_exception(error)
        self._answered(batch)

    def _answered(self, batch: _Batch) -> None:
        positions = self._placed.pop(batch, None)
        if positions and self.on_batch is not None:
            self.on_batch(batch, positions)


def _metadata(
    topic: str, partition: int, base_offset: int, stamps: int | list[int], index: int
) -> RecordMetadata:
    """Where a batch's record ``index`` was stored (``stamps``: see ``_Batch._stamps``);
    made with ``tuple.__new__``, without RecordMetadata's Python-level ``__new__``."""
    offset = base_offset + index if base_offset >= 0 else -1
    stamp = stamps if type(stamps) is int else stamps[index]  # type: ignore[index]
    return tuple.__new__(RecordMetadata, (topic, partition, offset, stamp, None))


def _call(callback: Callable[[Any, Any], None] | None, error: Any, metadata: Any) -> None:
    if callback is not None:
        try:
            callback(error, metadata)
        except Exception:
            log.exception("on_delivery callback failed")


def fill_batches(
    result: SendManyResult,
    queues: dict[TopicPartition, deque[_Batch]],
    topic: str,
    values: Sequence[bytes | None],
    keys: Sequence[bytes | None] | None,
    fixed: int | None,
    chosen: Sequence[int | None] | None,
    headers: Sequence[Iterable[tuple[str, bytes | None]] | None] | None,
    timestamps: Sequence[int | None] | None,
    count: int,
    pick: Callable[[str, bytes | None, int], int],
    clock: Clock,
    room: int,
) -> None:
    """``send_many``'s records appended to their partitions' open batches (new ones
    when full, ``room`` bytes each), with what is looked up per record hoisted out of
    the loop: ``fixed`` is one partition for all, ``chosen`` one per record, neither
    means ``pick`` by key. ``result`` learns each record's batch and index."""
    if fixed is None and (chosen is None or None in chosen):
        # Every partition picked before anything is appended: a key the partitioner
        # cannot hash fails the call with nothing of it enqueued.
        chosen = [
            pick(topic, None if keys is None else keys[i], count)
            if chosen is None or chosen[i] is None
            else chosen[i]
            for i in range(len(values))
        ]
    plain = headers is None and timestamps is None and None not in values
    if plain and fixed is not None and keys is None:
        tp = TopicPartition(topic, fixed)
        _fill_one_partition(result, queues, tp, values, clock, room)  # type: ignore[arg-type]
        return
    if plain and chosen is not None and None not in chosen and (keys is None or None not in keys):
        _fill_by_partition(result, queues, topic, values, keys, chosen, clock, room)  # type: ignore[arg-type]
        return
    batches, indexes, placed = result._batches, result._indexes, result._placed
    now = clock.time_ms()
    monotonic = clock.monotonic
    no_headers: RecordHeaders = ()
    # partition -> [queue, open batch]
    state: dict[int, list[Any]] = {}
    key: bytes | None = None
    hdrs = no_headers
    timestamp = now
    p = fixed
    for i, value in enumerate(values):
        if keys is not None:
            key = keys[i]
        if chosen is not None:
            p = chosen[i]
        size = RECORD_OVERHEAD + (len(value) if value else 0) + (len(key) if key else 0)
        if headers is not None:
            given = headers[i]
            if given:
                hdrs = tuple([(k, v) for k, v in given])
                size += sum(len(k.encode()) + len(v or b"") for k, v in hdrs)
            else:
                hdrs = no_headers
        if timestamps is not None:
            timestamp = timestamps[i]
            if timestamp is None:
                timestamp = now
        st = state.get(p)
        if st is None:
            st = state[p] = list(_open_batch(queues, TopicPartition(topic, p), result))
        batch = st[1]
        if batch is None or (batch.records and batch.size + size > room):
            batch = _Batch(TopicPartition(topic, p), monotonic())
            enqueue(st[0], batch)
            st[1] = batch
            batch.bulks.append(result)
            result._pending += 1
        records = batch.records
        records.append(key, value, hdrs, timestamp)  # type: ignore[union-attr]
        batch.size += size
        batches.append(batch)
        indexes.append(len(records) - 1)
        placed.setdefault(batch, []).append(i)  # type: ignore[union-attr]


def _fill_partition(
    result: SendManyResult,
    queues: dict[TopicPartition, deque[_Batch]],
    tp: TopicPartition,
    values: Sequence[bytes],
    keys: Sequence[bytes] | None,
    now: int,
    clock: Clock,
    room: int,
) -> list[tuple[_Batch, int, int, int]]:
    """Records of one partition (no null value or key, no headers, stamped ``now``)
    appended batch by batch, how many fit found by bisecting the running total of
    their sizes, instead of record by record. Per batch filled: (batch, index in it of
    the first record put there, how many, position in ``values`` of the first)."""
    queue, batch = _open_batch(queues, tp, result)
    sizes = map(len, values) if keys is None else map(add, map(len, values), map(len, keys))
    # totals[k]: the size of the first k records (summed in C: no Python call a record).
    totals = list(accumulate(map(RECORD_OVERHEAD.__add__, sizes), initial=0))
    filled = []
    n, i = len(values), 0
    while i < n:
        if batch is None or (batch.records and batch.size + totals[i + 1] - totals[i] > room):
            batch = _Batch(tp, clock.monotonic())
            enqueue(queue, batch)
            batch.bulks.append(result)
            result._pending += 1
        # The records i..j-1 whose sizes, added to the batch's, stay within room.
        j = bisect_right(totals, totals[i] + room - batch.size, lo=i + 1) - 1
        j = max(j, i + 1)  # an empty batch takes one record whatever its size
        records = batch.records
        filled.append((batch, len(records), j - i, i))
        records.extend(None if keys is None else keys[i:j], values[i:j], now)  # type: ignore[union-attr]
        batch.size += totals[j] - totals[i]
        i = j
    return filled


def _fill_one_partition(
    result: SendManyResult,
    queues: dict[TopicPartition, deque[_Batch]],
    tp: TopicPartition,
    values: Sequence[bytes],
    clock: Clock,
    room: int,
) -> None:
    """``fill_batches`` for values alone to one partition (what a run of ``produce``
    calls mostly is)."""
    filled = _fill_partition(result, queues, tp, values, None, clock.time_ms(), clock, room)
    for batch, first, count, at in filled:
        result._batches.extend(repeat(batch, count))
        result._indexes.extend(range(first, first + count))
        result._placed[batch] = range(at, at + count)


def _fill_by_partition(
    result: SendManyResult,
    queues: dict[TopicPartition, deque[_Batch]],
    topic: str,
    values: Sequence[bytes],
    keys: Sequence[bytes] | None,
    chosen: Sequence[int],
    clock: Clock,
    room: int,
) -> None:
    """``fill_batches`` for records with their partitions chosen (by key, or given), no
    headers, stamped now (what the Spark sink sends): each partition's records, in call
    order, filled as one; where each record went put back in call order by numpy."""
    now = clock.time_ms()
    parts = np.fromiter(chosen, np.int64, len(values))
    placement = _Placement(result, len(values))
    for group in _by_partition(parts):
        positions = group.tolist()
        pick = itemgetter(*positions)
        group_values = [pick(values)] if len(positions) == 1 else pick(values)
        group_keys = None
        if keys is not None:
            group_keys = [pick(keys)] if len(positions) == 1 else pick(keys)
        tp = TopicPartition(topic, int(parts[group[0]]))
        for batch, first, count, at in _fill_partition(
            result, queues, tp, group_values, group_keys, now, clock, room
        ):
            placement.put(batch, group[at : at + count], first)
    placement.done()


def _by_partition(parts: np.ndarray) -> list[np.ndarray]:
    """The positions of each partition's records, in call order (a stable sort)."""
    order = np.argsort(parts, kind="stable")
    return np.split(order, np.flatnonzero(np.diff(parts[order])) + 1)


class _Placement:
    """Where each record of one bulk call went (its batch, its index there), learnt
    partition by partition and handed to ``result`` in call order."""

    def __init__(self, result: SendManyResult, records: int) -> None:
        self.result = result
        self.batches = np.empty(records, object)
        self.indexes = np.empty(records, np.int64)

    def put(self, batch: _Batch, where: np.ndarray, first: int) -> None:
        """The records at positions ``where`` went to ``batch``, from its index ``first``."""
        self.batches[where] = batch
        self.indexes[where] = np.arange(first, first + len(where))
        self.result._placed[batch] = where.tolist()

    def done(self) -> None:
        # An object array indexes as a list does; the indexes as Python ints, which a
        # caller sees (offsets, callbacks' positions).
        self.result._batches = self.batches  # type: ignore[assignment]
        self.result._indexes = self.indexes.tolist()


def enqueue(queue: deque[_Batch], batch: _Batch) -> None:
    """``batch`` goes last in its partition's queue, and the batch before it takes no
    more records: only a queue's last batch is ever open, which ``send``'s hot path
    (it appends to the batch it used last while that is open) relies on."""
    if queue:
        queue[-1].open = False
    queue.append(batch)


def _open_batch(
    queues: dict[TopicPartition, deque[_Batch]], tp: TopicPartition, result: SendManyResult
) -> tuple[deque[_Batch], _Batch | None]:
    """The partition's queue, and its last batch if still open (``result`` then has
    records in it)."""
    queue = queues.get(tp)
    if queue is None:
        queue = queues[tp] = deque()
    batch = queue[-1] if queue and queue[-1].open else None
    if batch is not None:
        batch.bulks.append(result)
        result._pending += 1
    return queue, batch


def fill_column_batches(
    result: SendManyResult,
    queues: dict[TopicPartition, deque[_Batch]],
    topic: str,
    values: BinaryColumn,
    keys: BinaryColumn | None,
    chosen: np.ndarray,
    clock: Clock,
    room: int,
) -> None:
    """``send_columns``' records (partitions ``chosen``) in new batches of up to
    ``room`` bytes each, their partitions' records in call order; each batch holds row
    numbers into the columns, not records (``ColumnRows``). Nothing here is per record
    in Python: sizes, grouping and where each record went are numpy's."""
    now = clock.time_ms()
    sizes = values.sizes() + RECORD_OVERHEAD
    if keys is not None:
        sizes += keys.sizes()
    placement = _Placement(result, len(values))
    for group in _by_partition(chosen):
        tp = TopicPartition(topic, int(chosen[group[0]]))
        queue = queues.get(tp)
        if queue is None:
            queue = queues[tp] = deque()
        # totals[k]: the size of the group's first k records.
        totals = np.zeros(len(group) + 1, np.int64)
        np.cumsum(sizes[group], out=totals[1:])
        i = 0
        while i < len(group):
            # The records i..j-1 that fit in room; a batch takes one whatever its size.
            j = max(int(np.searchsorted(totals, totals[i] + room, side="right")) - 1, i + 1)
            where = group[i:j]
            batch = _Batch(tp, clock.monotonic(), ColumnRows(keys, values, where, now))
            batch.size = int(totals[j] - totals[i])
            batch.bulks.append(result)
            result._pending += 1
            enqueue(queue, batch)
            placement.put(batch, where, 0)
            i = j
    placement.done()
