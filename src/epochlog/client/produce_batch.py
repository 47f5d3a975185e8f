"""A producer's open and in-flight batches, and what callers get back: RecordMetadata
per record, SendManyResult per ``send_many`` call (one future for many records, metadata
built only when asked for). Apart from producer.py so it stays readable."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import overload

from epochlog.client.errors import TopicPartition


@dataclass(frozen=True)
class RecordMetadata:
    """Where a record was stored. ``leader_epoch`` is None: Produce answers (v9) do not
    say which epoch appended it; a consumer reads it from the batch."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    leader_epoch: int | None = None


# (key, value, headers, timestamp): what build_batch encodes, kept as is.
_Rec = tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]


@dataclass(eq=False)
class _Batch:
    tp: TopicPartition
    created: float
    records: list[_Rec] = field(default_factory=list)
    # (index in records, future) of records sent one by one with send().
    waiters: list[tuple[int, asyncio.Future[RecordMetadata]]] = field(default_factory=list)
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

    def fail(self, error: BaseException) -> None:
        for _, future in self.waiters:
            if not future.done():
                future.set_exception(error)
        for bulk in self.bulks:
            bulk._batch_failed(error)

    def complete(self, base_offset: int, append_time: int) -> None:
        self.base_offset, self.append_time = base_offset, append_time
        tp, records = self.tp, self.records
        for i, future in self.waiters:
            if not future.done():
                future.set_result(
                    RecordMetadata(
                        tp.topic,
                        tp.partition,
                        base_offset + i if base_offset >= 0 else -1,
                        append_time if append_time >= 0 else records[i][3],
                    )
                )
        for bulk in self.bulks:
            bulk._batch_done()


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
        batch, index = self._batches[i], self._indexes[i]
        base, append_time = batch.base_offset, batch.append_time
        return RecordMetadata(
            batch.tp.topic,
            batch.tp.partition,
            base + index if base >= 0 else -1,
            append_time if append_time >= 0 else batch.records[index][3],
        )

    def _batch_done(self) -> None:
        self._pending -= 1
        if self._pending == 0 and not self.future.done():
            self.future.set_result(self)

    def _batch_failed(self, error: BaseException) -> None:
        self._pending -= 1
        if not self.future.done():
            self.future.set_exception(error)
