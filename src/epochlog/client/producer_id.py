"""An idempotent producer's identity: its producer id and epoch, and the next sequence
of each partition. Apart from the producer's queues and sender (as Kafka keeps its
TransactionManager apart from the RecordAccumulator and Sender) because it changes for
other reasons: batching is about when and where records go, this is about whether the
leader accepts them.

Sequence recovery (as the Java client does for idempotent, non-transactional
producers): after an unclean truncation the leader no longer holds the sequences it
acknowledged and answers OUT_OF_ORDER_SEQUENCE_NUMBER or UNKNOWN_PRODUCER_ID; the
producer takes a new producer id (InitProducerId), restarts every sequence at 0 and
sends the refused batch again. A batch that fails for good after it was sealed would
leave a sequence gap that refuses every later batch: it also starts a new producer id."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Set
from typing import Any

from kafka.protocol.producer import InitProducerIdRequest

from epochlog.client.errors import DeliveryError, TopicPartition
from epochlog.client.metadata import Cluster, backoff_seconds
from epochlog.client.produce_batch import _Batch
from epochlog.protocol.errors import ErrorCode
from epochlog.seams import Clock

# The producer's logger: its renewals are part of the producer's story.
log = logging.getLogger("epochlog.client.producer")

INIT_PRODUCER_ID_VERSION = 4
# InitProducerId answers worth waiting out (besides the producer's retriable ones).
INIT_RETRIABLE = {
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.NOT_COORDINATOR,
    ErrorCode.CONCURRENT_TRANSACTIONS,
}
NO_PRODUCER = (-1, -1)
# The ``renewal`` reason of a producer that has never had an id.
FIRST_PRODUCER_ID = "first use"


class ProducerIds:
    """The producer id and epoch batches are sealed with, and each partition's next
    sequence. ``renewal`` says why a new producer id is needed (None: it is not); the
    sender renews it before it sends anything more, so one incident costs one id."""

    def __init__(
        self,
        cluster: Cluster,
        clock: Clock,
        config: Mapping[str, Any],
        retriable: Set[ErrorCode],
    ) -> None:
        self._cluster = cluster
        self._clock = clock
        self._config = config
        self._retriable = set(retriable) | INIT_RETRIABLE
        # (producer id, epoch); NO_PRODUCER until InitProducerId answers.
        self.producer = NO_PRODUCER
        self.renewal: str | None = None
        self._sequences: dict[TopicPartition, int] = {}

    async def init(self, within_s: float | None = None) -> None:
        """InitProducerId from any live broker: a broker just killed may still be listed
        in metadata, so each is tried in turn, then again after a backoff, for
        ``within_s`` (default ``delivery.timeout.ms``)."""
        if within_s is None:
            within_s = self._config["delivery.timeout.ms"] / 1000
        deadline = self._clock.monotonic() + within_s
        request = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000)
        attempt = 0
        while True:
            problems = []
            try:
                await self._cluster.refresh([])
            except (ConnectionError, OSError) as exc:
                problems.append(str(exc))
            brokers = sorted(self._cluster.cache.brokers)
            start = attempt % len(brokers) if brokers else 0
            for broker in brokers[start:] + brokers[:start]:
                try:
                    response = await self._cluster.send(broker, request, INIT_PRODUCER_ID_VERSION)
                except (ConnectionError, OSError) as exc:
                    problems.append(f"broker {broker}: {exc}")
                    continue
                code = ErrorCode(response.error_code)
                if code == ErrorCode.NONE:
                    self.producer = (response.producer_id, response.producer_epoch)
                    return
                if code not in self._retriable:
                    raise DeliveryError(TopicPartition("*", -1), "InitProducerId refused", code)
                problems.append(f"broker {broker}: {code.name}")
            if self._clock.monotonic() >= deadline:
                raise DeliveryError(
                    TopicPartition("*", -1), "InitProducerId failed: " + "; ".join(problems)
                )
            log.info("InitProducerId not answered (%s); retrying", "; ".join(problems))
            await self._clock.sleep(
                backoff_seconds(
                    attempt, self._config["retry.backoff.ms"], self._config["retry.backoff.max.ms"]
                )
            )
            attempt += 1

    async def renew(self, within_s: float | None = None) -> None:
        """A new producer id with every sequence back at 0; sealed batches keep theirs."""
        reason, old = self.renewal, self.producer
        await self.init(within_s)
        self.renewal = None
        self._sequences.clear()
        if old == NO_PRODUCER:
            log.info("producer id %d (epoch %d)", *self.producer)
            return
        log.warning(
            "producer id %d (epoch %d) -> %d (epoch %d), sequences reset: %s",
            old[0],
            old[1],
            *self.producer,
            reason,
        )

    def reset(self, producer: tuple[int, int]) -> None:
        """A producer id and epoch from elsewhere (a transactional InitProducerId);
        every sequence starts again at 0."""
        self.producer = producer
        self.renewal = None
        self._sequences.clear()

    def need_new(self, batch: _Batch, reason: str) -> bool:
        """Ask for a new producer id because of ``batch``; True if one is needed now.
        Only a batch of the current producer id asks: one renewal per incident."""
        if self.producer[0] >= 0 and batch.producer == self.producer:
            self.renewal = self.renewal or f"{batch.tp}: {reason}"
            return True
        return False

    def stamp(self, batch: _Batch) -> tuple[int, int]:
        """The (producer id, epoch) to seal ``batch`` with; with a producer id, the batch
        takes it and the partition's next sequences."""
        pid, epoch = self.producer
        if pid >= 0:
            batch.producer = (pid, epoch)
            batch.base_sequence = self._sequences.get(batch.tp, 0)
            self._sequences[batch.tp] = (batch.base_sequence + len(batch.records)) & 0x7FFFFFFF
        return pid, epoch
