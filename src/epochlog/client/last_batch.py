"""Where ``AsyncProducer.send``'s hot path puts the next record: the open batch the last
one went to, while nothing could make the full path choose another."""

from __future__ import annotations

from epochlog.client.produce_batch import _Batch
from epochlog.protocol.column_rows import RecordLists

# A loop of send()s that awaits nothing else lets the loop run each time its batch grows
# by this much (and when it is full): the sender, the answers and the socket are served
# while it runs, so batches go and are answered as they fill, not all at its end (a
# partition has one batch in flight at a time).
TURN_BYTES = 64 * 1024


class LastBatch:
    """The open batch ``send`` put a record in last, and what that record asked for
    (topic, partition argument): a next record asking the same goes to the same batch
    while it is open, has room and send() answers its last record, without the
    partitioner, the queues or any of the checks of the full path. So it is remembered
    only where nothing waits to enqueue first, and forgotten (``forget``) whenever the
    full path could choose otherwise: a send queueing to wait (for the sender, for
    metadata: records held), a partition count changed, a batch sealed (the sticky
    partitioner moves on), a close."""

    __slots__ = ("topic", "partition", "batch", "records", "turn_at", "_batch_size")

    def __init__(self, batch_size: int) -> None:
        self.topic: str | None = None
        self.partition: int | None = None
        self.batch: _Batch | None = None
        # The batch's records, read here with one lookup less.
        self.records: RecordLists | None = None
        # The batch's size at which send() next lets the loop run (``turned``).
        self.turn_at = 0
        self._batch_size = batch_size

    def remember(self, topic: str, partition: int | None, batch: _Batch) -> None:
        self.topic, self.partition = topic, partition
        self.batch, self.records = batch, batch.records  # type: ignore[assignment]
        self.turn_at = min(batch.size + TURN_BYTES, self._batch_size)

    def turned(self) -> bool:
        """The loop is let run at ``turn_at``; the next turn is set. True if the batch
        is full (its sender is to be woken)."""
        size = self.batch.size  # type: ignore[union-attr]
        self.turn_at = min(size + TURN_BYTES, self._batch_size)
        return size >= self._batch_size

    def forget(self) -> None:
        """Also let go of the batch: once sent, it must not stay alive for this."""
        self.topic, self.batch, self.records = None, None, None
