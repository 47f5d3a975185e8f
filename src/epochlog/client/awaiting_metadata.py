"""Records sent to a topic whose metadata the producer does not have yet (librdkafka's
"unassigned" queue): ``send`` never waits for a topic to appear, so one unknown topic
cannot hold up the records behind it. The sender places them once a Metadata answer
(which may auto-create the topic) gives the partition count, in the order they were
sent; those still unplaced after ``delivery.timeout.ms`` fail with
UNKNOWN_TOPIC_OR_PARTITION."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from epochlog.client.errors import DeliveryError, TopicPartition
from epochlog.client.produce_batch import RecordMetadata
from epochlog.client.record_future import HeldRecord
from epochlog.protocol.errors import ErrorCode

Header = tuple[str, bytes | None]
# The producer's append of one record to its partition's batch; the last argument, the
# record's waiter, is answered from there.
AddRecord = Callable[
    [str, bytes | None, bytes | None, int | None, Iterable[Header] | None, int | None, int, Any],
    object,
]


@dataclass(slots=True)
class UnplacedRecord:
    """One ``send`` waiting for its topic's partition count."""

    value: bytes | None
    key: bytes | None
    partition: int | None
    headers: Iterable[Header] | None
    timestamp: int | None
    future: HeldRecord[RecordMetadata]
    sent_at: float


class RecordsAwaitingMetadata(dict[str, deque[UnplacedRecord]]):
    """Per topic, in send order, the records that have no partition yet (a dict, so
    that ``send``'s hot path asks ``topic in awaiting`` at C speed)."""

    def hold(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None,
        partition: int | None,
        headers: Iterable[Header] | None,
        timestamp: int | None,
        now: float,
        future: HeldRecord[RecordMetadata],
    ) -> None:
        """Keep a record until its topic is known; ``future`` is ``send``'s answer."""
        record = UnplacedRecord(value, key, partition, headers, timestamp, future, now)
        self.setdefault(topic, deque()).append(record)

    def place(self, partition_count: Callable[[str], int | None], add: AddRecord) -> bool:
        """Hand every record whose topic is now known to ``add`` (the producer's append),
        in send order; True if some still wait."""
        for topic in list(self):
            count = partition_count(topic)
            if count is None:
                continue
            for r in self.pop(topic):
                try:
                    add(topic, r.value, r.key, r.partition, r.headers, r.timestamp, count, r.future)
                except Exception as exc:  # a bad partition or an oversized record
                    fail(r, exc)
        return bool(self)

    def expire(self, now: float, timeout_s: float) -> int:
        """Fail the records that waited longer than ``timeout_s`` for their topic; how
        many failed."""
        failed = 0
        for topic in list(self):
            queue = self[topic]
            while queue and now - queue[0].sent_at >= timeout_s:
                failed += 1
                fail(
                    queue.popleft(),
                    DeliveryError(
                        TopicPartition(topic, -1),
                        f"topic {topic} not present in metadata after {timeout_s:g}s",
                        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    ),
                )
            if not queue:
                del self[topic]
        return failed

    def fail_all(self, reason: str) -> None:
        for topic, queue in self.items():
            for record in queue:
                fail(record, DeliveryError(TopicPartition(topic, -1), reason))
        self.clear()


def fail(record: UnplacedRecord, error: BaseException) -> None:
    if not record.future.done():
        record.future.set_exception(error)
