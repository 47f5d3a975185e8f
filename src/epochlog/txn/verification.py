"""Transactions verified before they are written (KIP-890 part 1, Kafka's
AddPartitionsToTxnManager and its part of ReplicaManager): before a partition leader
appends the batch that would open a producer's transaction there, it asks the
transactional id's coordinator (AddPartitionsToTxn v4, ``verify_only``) whether that
producer id and epoch holds an ongoing transaction including the partition. A batch
the coordinator does not vouch for is refused and never stored: written, it would hold
back the partition's last stable offset with a transaction no coordinator ends.

The partition's guard (``storage/producer_state.py``) is taken before asking and checked
at the append, so a marker that overtakes the answer spends it. A transaction open at
the partition is not asked about again. The question is bounded by the Produce's own
timeout; a coordinator that cannot answer makes the Produce NOT_ENOUGH_REPLICAS, which
every producer retries, as Kafka answers."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from kafka.protocol.producer import AddPartitionsToTxnRequest

from epochlog.client.connection import BrokerConnection
from epochlog.protocol.batch import Buffer, transactional_producer
from epochlog.protocol.errors import ErrorCode, KafkaError
from epochlog.seams.waiting import with_timeout
from epochlog.storage.producer_state import VerificationGuard
from epochlog.txn.metadata import TopicPartition

if TYPE_CHECKING:
    from epochlog.replication.partition import Partition
    from epochlog.seams import Clock, Network

log = logging.getLogger("epochlog.txn")

VERIFY_VERSION = 4

# coordinator_of(transactional id) -> (broker id, host, port) of its coordinator, None
# while it has none (no __transaction_state yet, its partition leaderless).
CoordinatorOf = Callable[[str], "tuple[int, str, int] | None"]
PartitionOf = Callable[[str, int], "Partition"]

# Answers a producer may not retry as it should: the Produce says NOT_ENOUGH_REPLICAS,
# retried by every client and no reason to refresh metadata (Kafka's choice).
_UNVERIFIABLE = {
    ErrorCode.NETWORK_EXCEPTION,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_COORDINATOR,
    ErrorCode.CONCURRENT_TRANSACTIONS,
}


def _produce_error(code: ErrorCode) -> KafkaError:
    """The Produce's answer for a partition the coordinator did not vouch for."""
    if code in _UNVERIFIABLE:
        return KafkaError(
            ErrorCode.NOT_ENOUGH_REPLICAS,
            f"could not verify that the transaction includes the partition: {code.name}",
        )
    if code == ErrorCode.INVALID_TXN_STATE:
        return KafkaError(code, "the partition was not added to the transaction")
    if code == ErrorCode.PRODUCER_FENCED:
        # What producers expect of a Produce from a fenced epoch.
        return KafkaError(ErrorCode.INVALID_PRODUCER_EPOCH, "the producer epoch is fenced")
    return KafkaError(code, f"transaction not verified: {code.name}")


class TransactionVerifier:
    def __init__(
        self,
        network: Network,
        clock: Clock,
        coordinator_of: CoordinatorOf,
        enabled: bool,
        timeout_ms: int,
    ) -> None:
        self._network = network
        self._clock = clock
        self._coordinator_of = coordinator_of
        # transaction.partition.verification.enable, followed live (Broker._reconfigure).
        self.enabled = enabled
        self._timeout_s = timeout_ms / 1000
        self._connections: dict[int, BrokerConnection] = {}
        self._connecting = asyncio.Lock()

    async def close(self) -> None:
        for conn in self._connections.values():
            with contextlib.suppress(Exception):
                await conn.close()
        self._connections.clear()

    async def guards(
        self,
        transactional_id: str,
        records: Mapping[TopicPartition, Buffer | None],
        partition_of: PartitionOf,
        timeout_s: float,
    ) -> dict[TopicPartition, VerificationGuard | KafkaError]:
        """A Produce's partitions whose transactional batches were verified, with the
        guard to append them under, and those refused, with the Produce's error. The
        others' appends pass no guard (``NO_GUARD``): they may only continue a
        transaction open at the partition."""
        producers = {}
        for tp, data in records.items():
            producer = transactional_producer(data or b"")
            if producer is not None:
                producers[tp] = producer
        if len(set(producers.values())) > 1:
            # Kafka refuses the whole request: one transactional id, one producer.
            refused = KafkaError(
                ErrorCode.INVALID_PRODUCER_ID_MAPPING,
                "transactional records of more than one producer id and epoch",
            )
            return dict.fromkeys(records, refused)
        started: dict[TopicPartition, VerificationGuard | KafkaError] = {}
        now_ms = self._clock.time_ms()
        for tp, (producer_id, epoch) in producers.items():
            try:
                partition = partition_of(*tp)
                partition.check_leader(-1)
            except KafkaError:
                continue  # not led here: its append answers why
            state = partition.log.producer_state
            guard = state.start_verification(producer_id, epoch, now_ms)
            if guard is not None:
                started[tp] = guard
        if not started:
            return started
        producer_id, epoch = next(iter(producers.values()))
        codes = await self._ask(transactional_id, producer_id, epoch, list(started), timeout_s)
        for tp, code in codes.items():
            if code != ErrorCode.NONE:
                started[tp] = _produce_error(code)
                level = logging.INFO if code in _UNVERIFIABLE else logging.WARNING
                log.log(
                    level,
                    "%s-%d: transactional batch of producer %d epoch %d (transactional id "
                    "%r) refused: the coordinator answered %s",
                    *tp,
                    producer_id,
                    epoch,
                    transactional_id,
                    code.name,
                )
        return started

    async def _ask(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        partitions: list[TopicPartition],
        timeout_s: float,
    ) -> dict[TopicPartition, ErrorCode]:
        """The coordinator's answer for each partition (NETWORK_EXCEPTION for one it
        could not be asked about in time)."""
        codes = dict.fromkeys(partitions, ErrorCode.NETWORK_EXCEPTION)
        coordinator = self._coordinator_of(transactional_id)
        if coordinator is None:
            return dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        by_topic: dict[str, list[int]] = {}
        for topic, index in partitions:
            by_topic.setdefault(topic, []).append(index)
        request = AddPartitionsToTxnRequest(
            transactions=[
                AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction(
                    transactional_id=transactional_id,
                    producer_id=producer_id,
                    producer_epoch=epoch,
                    verify_only=True,
                    topics=[
                        AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=t, partitions=p)
                        for t, p in by_topic.items()
                    ],
                )
            ]
        )
        try:
            response = await with_timeout(
                self._clock,
                self._send(coordinator, request),
                min(timeout_s, self._timeout_s),
            )
        except (OSError, ConnectionError, TimeoutError) as exc:
            log.info("verifying %r with broker %d: %r", transactional_id, coordinator[0], exc)
            await self._drop(coordinator[0])
            return codes
        if response.error_code != ErrorCode.NONE:
            # Refused as a broker (CLUSTER_ACTION): the producer is told the partition
            # is not in its transaction, as Kafka tells it.
            return dict.fromkeys(partitions, ErrorCode.INVALID_TXN_STATE)
        for txn in response.results_by_transaction or []:
            for topic in txn.topic_results or []:
                for p in topic.results_by_partition or []:
                    tp = (topic.name, p.partition_index)
                    if tp in codes:
                        codes[tp] = ErrorCode(p.partition_error_code)
        return codes

    async def _send(self, coordinator: tuple[int, str, int], request: Any) -> Any:
        broker_id, host, port = coordinator
        async with self._connecting:
            conn = self._connections.get(broker_id)
            if conn is None or conn.closed:
                conn = await BrokerConnection.open(
                    self._network, host, port, "epochlog-txn-verification"
                )
                self._connections[broker_id] = conn
        return await conn.send(request, VERIFY_VERSION)

    async def _drop(self, broker_id: int) -> None:
        """A connection that failed or did not answer in time is not used again."""
        stale = self._connections.pop(broker_id, None)
        if stale is not None:
            with contextlib.suppress(Exception):
                await stale.close()
