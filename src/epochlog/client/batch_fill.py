"""How ``send_many``'s and ``send_columns``' records fill their partitions' batches:
what is looked up per record hoisted out of the loop, whole runs of a partition's
records placed by bisecting their sizes, columns grouped by numpy."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from itertools import repeat
from operator import itemgetter
from typing import Any

import numpy as np

from epochlog.client.errors import TopicPartition
from epochlog.client.produce_batch import (
    RECORD_OVERHEAD,
    RecordHeaders,
    SendManyResult,
    _Batch,
    enqueue,
    value_lengths,
)
from epochlog.protocol.column_rows import BinaryColumn, ColumnRows
from epochlog.seams import Clock


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
    lengths: np.ndarray | None = None,
) -> None:
    """``send_many``'s records appended to their partitions' open batches (new ones
    when full, ``room`` bytes each), with what is looked up per record hoisted out of
    the loop: ``fixed`` is one partition for all, ``chosen`` one per record, neither
    means ``pick`` by key. ``result`` learns each record's batch and index. ``lengths``:
    the values' (``value_lengths``), if already counted."""
    if fixed is None and (chosen is None or None in chosen):
        # Every partition picked before anything is appended: a key the partitioner
        # cannot hash fails the call with nothing of it enqueued.
        chosen = [
            pick(topic, None if keys is None else keys[i], count)
            if chosen is None or chosen[i] is None
            else chosen[i]
            for i in range(len(values))
        ]
    plain = headers is None and timestamps is None
    if plain and lengths is None:
        lengths = value_lengths(values)  # (None again if a value is None)
    plain = plain and lengths is not None
    if plain and fixed is not None and keys is None:
        tp = TopicPartition(topic, fixed)
        _fill_one_partition(result, queues, tp, values, lengths, clock, room)  # type: ignore[arg-type]
        return
    if plain and chosen is not None and None not in chosen and (keys is None or None not in keys):
        _fill_by_partition(result, queues, topic, values, keys, lengths, chosen, clock, room)  # type: ignore[arg-type]
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
            batch.join(result)
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
    lengths: np.ndarray,
    now: int,
    clock: Clock,
    room: int,
) -> list[tuple[_Batch, int, int, int]]:
    """Records of one partition (no null value or key, no headers, stamped ``now``;
    ``lengths``: the values') appended batch by batch, how many fit found by searching
    the running total of their sizes, instead of record by record. Per batch filled:
    (batch, index in it of the first record put there, how many, position in
    ``values`` of the first)."""
    queue, batch = _open_batch(queues, tp, result)
    sizes = lengths + RECORD_OVERHEAD
    if keys is not None:
        sizes += np.fromiter(map(len, keys), np.int64, len(keys))
    # totals[k]: the size of the first k records (summed by numpy: no Python int a record).
    totals = np.zeros(len(values) + 1, np.int64)
    np.cumsum(sizes, out=totals[1:])
    filled = []
    n, i = len(values), 0
    while i < n:
        if batch is None or (batch.records and batch.size + int(sizes[i]) > room):
            batch = _Batch(tp, clock.monotonic())
            enqueue(queue, batch)
            batch.join(result)
        # The records i..j-1 whose sizes, added to the batch's, stay within room.
        j = int(np.searchsorted(totals, totals[i] + room - batch.size, side="right")) - 1
        j = max(j, i + 1)  # an empty batch takes one record whatever its size
        records = batch.records
        filled.append((batch, len(records), j - i, i))
        records.extend(None if keys is None else keys[i:j], values[i:j], now)  # type: ignore[union-attr]
        batch.size += int(totals[j] - totals[i])
        i = j
    return filled


def _fill_one_partition(
    result: SendManyResult,
    queues: dict[TopicPartition, deque[_Batch]],
    tp: TopicPartition,
    values: Sequence[bytes],
    lengths: np.ndarray,
    clock: Clock,
    room: int,
) -> None:
    """``fill_batches`` for values alone to one partition (what a run of ``produce``
    calls mostly is)."""
    now = clock.time_ms()
    filled = _fill_partition(result, queues, tp, values, None, lengths, now, clock, room)
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
    lengths: np.ndarray,
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
            result, queues, tp, group_values, group_keys, lengths[group], now, clock, room
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
        self.result._placed[batch] = where

    def done(self) -> None:
        # The indexes stay an array: no Python int a record unless somebody asks
        # (SendManyResult makes them ints as it hands them out). The batches become a
        # list: each batch refers back to the result, and the collector cannot see
        # through an object array, so that cycle would keep every batch and its
        # payload alive for good.
        self.result._batches = self.batches.tolist()
        self.result._indexes = self.indexes  # type: ignore[assignment]


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
        batch.join(result)
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
            batch.join(result)
            enqueue(queue, batch)
            placement.put(batch, where, 0)
            i = j
    placement.done()
