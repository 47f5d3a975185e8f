"""A producer's open and in-flight batches, and what callers get back: RecordMetadata
per record, SendManyResult per ``send_many`` call (one future for many records, metadata
built only when asked for), and how records are sized against ``max.request.size``.
Apart from producer.py so it stays readable."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import repeat
from typing import Any, NamedTuple, overload

import numpy as np

from epochlog.client.errors import DeliveryError, TopicPartition
from epochlog.client.record_future import HeldRecord, RecordOutcomes
from epochlog.protocol.column_rows import NS_PER_MS, BinaryColumn, ColumnRows, RecordLists
from epochlog.protocol.errors import ErrorCode

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
) -> np.ndarray | None:
    """``send_many``'s arguments checked before anything is enqueued: one length for
    every per-record sequence, and no record over ``max.request.size`` (with keys or
    headers: by ``check_sizes`` as the records are filled in). Returns the values'
    lengths (``value_lengths``) for records without headers, which ``fill_batches``
    fills by; None for the rest."""
    n = len(values)
    lengths = None if headers is not None else value_lengths(values)
    for name, seq in (("keys", keys), ("headers", headers), ("timestamps", timestamps)):
        if seq is not None and len(seq) != n:
            raise ValueError(f"{name} has {len(seq)} items for {n} values")
    if partition is not None and not isinstance(partition, int) and len(partition) != n:
        raise ValueError(f"partition has {len(partition)} items for {n} values")
    if keys is None and headers is None and n:
        limit = max_request_size - BATCH_OVERHEAD - RECORD_OVERHEAD
        biggest = (
            int(lengths.max())
            if lengths is not None
            else max((len(v) for v in values if v), default=0)
        )
        if biggest > limit:
            tp = TopicPartition(topic, partition if isinstance(partition, int) else -1)
            size = biggest + RECORD_OVERHEAD + BATCH_OVERHEAD
            raise RecordTooLargeError(tp, size, max_request_size)
    return lengths


def value_lengths(values: Sequence[bytes | None]) -> np.ndarray | None:
    """Every value's length (int64, counted in C), or None if a value is None."""
    try:
        return np.fromiter(map(len, values), np.int64, len(values))
    except TypeError:  # len(None)
        return None


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
    # Who answers the batch's records, in their order, and the index of each one's first
    # record: a run of send()'s records (their RecordOutcomes), a waiter of one record
    # (the sync Producer's DeliveryFuture from append_now, a HeldRecord placed once its
    # topic was known), a send_many call. Two lists, not a list of pairs, as a pair per
    # queued record would be one more object the cyclic collector walks at every full
    # pass over the backlog.
    answerers: list[Any] = field(default_factory=list)
    answerer_starts: list[int] = field(default_factory=list)
    # The run of send()'s records a next one joins: the last answerer, if it is one.
    outcomes: RecordOutcomes[RecordMetadata] | None = None
    size: int = 0
    payload: bytes | memoryview | None = None
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
        self.answerers.append(future)
        self.answerer_starts.append(index)
        self.outcomes = None

    def send_outcomes(self, index: int, loop: asyncio.AbstractEventLoop) -> RecordOutcomes[Any]:
        """What answers send()'s ``records[index]``: the outcomes of the run of send()
        records it ends, a new run's if something else answers the record before it."""
        outcomes = self.outcomes
        if outcomes is None:
            outcomes = self.outcomes = RecordOutcomes(loop)
            self.answerers.append(outcomes)
            self.answerer_starts.append(index)
        return outcomes

    def join(self, result: SendManyResult) -> None:
        """The records ``result``'s call appends next are answered through it."""
        self.answerers.append(result)
        self.answerer_starts.append(len(self.records))
        self.outcomes = None
        result._pending += 1

    def metadata(self, index: int) -> RecordMetadata:
        """Where ``records[index]`` was stored, once the batch is acknowledged."""
        return _metadata(self.tp.topic, self.tp.partition, self.base_offset, self._stamps(), index)

    def answers(self) -> Callable[[int], RecordMetadata]:
        """``metadata`` from copies of what it needs: a caller's future must not keep the
        batch's records alive."""
        return partial(
            _metadata, self.tp.topic, self.tp.partition, self.base_offset, self._stamps()
        )

    def _stamps(self) -> int | list[int]:
        """The timestamp stored: the broker's append time or a column batch's one (in
        milliseconds), else each record's own (``RecordLists.stamps_ns``, nanoseconds)."""
        if self.append_time >= 0:
            return self.append_time
        records = self.records
        return records.stamps_ns if type(records) is RecordLists else records.timestamp  # type: ignore[union-attr]

    def fail(self, error: BaseException) -> None:
        self.error = error
        self.open = False
        self._answer(error, None)

    def complete(self, base_offset: int, append_time: int) -> None:
        self.base_offset, self.append_time = base_offset, append_time
        self._answer(None, self.answers())  # made once, not a metadata() call a record

    def _answer(self, error: BaseException | None, answers: Callable[[int], Any] | None) -> None:
        """Every answerer, in the order of its records. send()'s callbacks run from the
        loop, as asyncio's do; so the others go there too, each in its turn: no record
        is reported before one ahead of it, in this batch or in one answered before."""
        if not self.answerers:
            return
        loop = asyncio.get_running_loop()
        answerers, starts = self.answerers, self.answerer_starts
        i, n = 0, len(answerers)
        while i < n:
            answerer = answerers[i]
            if type(answerer) is RecordOutcomes:  # these schedule their own callbacks
                answerer.settle(error, answers)
            elif type(answerer) is HeldRecord:
                _set(answerer, error, answers, starts[i])
            else:  # the others, up to the next of those, in one loop callback
                j = i + 1
                while j < n and not isinstance(answerers[j], RecordOutcomes):
                    j += 1
                loop.call_soon(self._answer_others, error, answers, answerers[i:j], starts[i:j])
                i = j
                continue
            i += 1

    def _answer_others(
        self,
        error: BaseException | None,
        answers: Callable[[int], Any] | None,
        answerers: list[Any],
        starts: list[int],
    ) -> None:
        for answerer, start in zip(answerers, starts, strict=True):
            if type(answerer) is SendManyResult:
                if error is None:
                    answerer._batch_done(self)
                else:
                    answerer._batch_failed(self, error)
            else:
                _set(answerer, error, answers, start)


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
        return self._batches[i].metadata(int(self._indexes[i]))

    def call_back(
        self,
        batch: _Batch,
        positions: Sequence[int],
        callbacks: Sequence[Callable[[Any, Any], None] | None],
    ) -> None:
        """``callbacks[i](error, metadata)`` for the records i of this call in ``batch``,
        once answered (None: no callback); one that raises is logged, the rest still run."""
        error, indexes = batch.error, self._indexes
        if type(indexes) is np.ndarray:  # (see batch_fill._Placement) once, for all batches
            indexes = self._indexes = indexes.tolist()
        if error is not None:
            for i in positions:
                _call(callbacks[i], error, None)
            return
        # batch.metadata's tuples made here: no method call a record.
        tp, base, stamps = batch.tp, batch.base_offset, batch._stamps()
        topic, partition, make = tp.topic, tp.partition, tuple.__new__
        n = len(positions)
        if type(positions) is range:  # (batch_fill) one after another in the batch too
            first = indexes[positions.start]
            rows: Sequence[int] = range(first, first + n)
            calls = callbacks[positions.start : positions.stop]
            offsets: Iterable[int] = range(base + first, base + first + n)
        else:
            rows = [indexes[i] for i in positions]
            calls = [callbacks[i] for i in positions]
            offsets = [base + row for row in rows]
        if base < 0:
            offsets = repeat(-1, n)
        if type(stamps) is int:
            stamped: Iterable[int] = repeat(stamps, n)
        else:
            stamped = [stamps[row] // NS_PER_MS for row in rows]  # type: ignore[index]
        for callback, offset, stamp in zip(calls, offsets, stamped, strict=True):
            if callback is None:
                continue
            try:
                callback(None, make(RecordMetadata, (topic, partition, offset, stamp, None)))
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
        if self.on_batch is not None and positions is not None and len(positions):
            if type(positions) is np.ndarray:
                positions = positions.tolist()
            self.on_batch(batch, positions)


def _metadata(
    topic: str, partition: int, base_offset: int, stamps: int | list[int], index: int
) -> RecordMetadata:
    """Where a batch's record ``index`` was stored (``stamps``: see ``_Batch._stamps``);
    made with ``tuple.__new__``, without RecordMetadata's Python-level ``__new__``."""
    offset = base_offset + index if base_offset >= 0 else -1
    stamp = stamps if type(stamps) is int else stamps[index] // NS_PER_MS  # type: ignore[index]
    return tuple.__new__(RecordMetadata, (topic, partition, offset, stamp, None))


def _set(
    waiter: Any, error: BaseException | None, answers: Callable[[int], Any] | None, index: int
) -> None:
    """A waiter's answer: ``records[index]``'s metadata, or the batch's error."""
    if not waiter.done():
        if answers is None:
            waiter.set_exception(error)
        else:
            waiter.set_result(answers(index))


def _call(callback: Callable[[Any, Any], None] | None, error: Any, metadata: Any) -> None:
    if callback is not None:
        try:
            callback(error, metadata)
        except Exception:
            log.exception("on_delivery callback failed")


def enqueue(queue: deque[_Batch], batch: _Batch) -> None:
    """``batch`` goes last in its partition's queue, and the batch before it takes no
    more records: only a queue's last batch is ever open, which ``send``'s hot path
    (it appends to the batch it used last while that is open) relies on."""
    if queue:
        queue[-1].open = False
    queue.append(batch)
