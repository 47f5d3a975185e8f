"""Mixed into AsyncAdmin: what operators ask about transactions (Kafka's
kafka-transactions.sh): ListTransactions from every broker (each coordinates its own
transactional ids), DescribeTransactions from an id's coordinator, DescribeProducers
from a partition's leader; hanging transactions found from the three and aborted with
WriteTxnMarkers to the partition's leader, as Kafka's Admin.abortTransaction does."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kafka.protocol.admin import (
    DescribeProducersRequest,
    DescribeTransactionsRequest,
    ListTransactionsRequest,
)
from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.protocol.producer import WriteTxnMarkersRequest

from epochlog.client.errors import KafkaClientError
from epochlog.protocol.errors import ErrorCode

TRANSACTION_KEY = 1
WRITE_TXN_MARKERS_VERSION = 1


@dataclass(frozen=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str
    coordinator: int


@dataclass(frozen=True)
class TransactionDescription:
    transactional_id: str
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_time_ms: int
    partitions: list[tuple[str, int]]
    coordinator: int


@dataclass(frozen=True)
class ProducerState:
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int


@dataclass(frozen=True)
class OpenTransaction:
    """A transaction a partition holds open: what find-hanging reports."""

    topic: str
    partition: int
    producer: ProducerState


class TransactionAdmin:
    describe_cluster: Any
    broker: Any

    async def list_transactions(
        self, states: list[str] | None = None, producer_ids: Iterable[int] = ()
    ) -> list[TransactionListing]:
        info = await self.describe_cluster()
        request = ListTransactionsRequest(
            state_filters=states or [], producer_id_filters=sorted(producer_ids)
        )
        out = []
        for broker_id in sorted(info.brokers):
            response = await (await self.broker(broker_id)).send(request, 0)
            if response.error_code:
                raise KafkaClientError(ErrorCode(response.error_code), f"broker {broker_id}")
            out += [
                TransactionListing(
                    t.transactional_id, t.producer_id, t.transaction_state, broker_id
                )
                for t in response.transaction_states
            ]
        return sorted(out, key=lambda t: t.transactional_id)

    async def describe_transaction(self, transactional_id: str) -> TransactionDescription:
        info = await self.describe_cluster()
        find = FindCoordinatorRequest(key_type=TRANSACTION_KEY, coordinator_keys=[transactional_id])
        (answer,) = (await (await self.broker(min(info.brokers))).send(find, 4)).coordinators
        if answer.error_code:
            raise KafkaClientError(ErrorCode(answer.error_code), transactional_id)
        request = DescribeTransactionsRequest(transactional_ids=[transactional_id])
        (state,) = (await (await self.broker(answer.node_id)).send(request, 0)).transaction_states
        if state.error_code:
            raise KafkaClientError(ErrorCode(state.error_code), transactional_id)
        return TransactionDescription(
            transactional_id,
            state.transaction_state,
            state.producer_id,
            state.producer_epoch,
            state.transaction_timeout_ms,
            state.transaction_start_time_ms,
            [(t.topic, p) for t in state.topics for p in t.partitions],
            answer.node_id,
        )

    async def describe_producers(self, topic: str, partition: int) -> list[ProducerState]:
        return (await self.producers([(topic, partition)]))[(topic, partition)]

    async def producers(
        self, partitions: Iterable[tuple[str, int]]
    ) -> dict[tuple[str, int], list[ProducerState]]:
        """DescribeProducers of each partition, one request to each partition's leader."""
        wanted = sorted(set(partitions))
        info = await self.describe_cluster(sorted({topic for topic, _ in wanted}))
        by_leader: dict[int, dict[str, list[int]]] = {}
        for topic, partition in wanted:
            leader = info.topics[topic].partitions[partition].leader
            by_leader.setdefault(leader, {}).setdefault(topic, []).append(partition)
        out: dict[tuple[str, int], list[ProducerState]] = {}
        for leader, topics in sorted(by_leader.items()):
            request = DescribeProducersRequest(
                topics=[
                    DescribeProducersRequest.TopicRequest(name=t, partition_indexes=p)
                    for t, p in topics.items()
                ]
            )
            for t in (await (await self.broker(leader)).send(request, 0)).topics:
                for answer in t.partitions:
                    tp = f"{t.name}-{answer.partition_index}"
                    if answer.error_code:
                        raise KafkaClientError(ErrorCode(answer.error_code), tp)
                    out[(t.name, answer.partition_index)] = [
                        ProducerState(
                            p.producer_id,
                            p.producer_epoch,
                            p.last_sequence,
                            p.last_timestamp,
                            p.coordinator_epoch,
                            p.current_txn_start_offset,
                        )
                        for p in answer.active_producers
                    ]
        return out

    async def find_hanging_transactions(
        self,
        now_ms: int,
        topic: str | None = None,
        partition: int | None = None,
        broker_id: int | None = None,
        max_transaction_timeout_ms: int = 15 * 60_000,
    ) -> list[OpenTransaction]:
        """kafka-transactions.sh find-hanging: transactions partitions hold open longer
        than any transaction may last (by their last record's timestamp, against
        ``now_ms``) whose producer id no transactional id holds, or whose coordinator's
        transaction does not include the partition: no coordinator will end them. The
        partitions searched: ``topic``'s (or its one ``partition``), else every
        non-internal topic's; with ``broker_id``, those it holds a replica of."""
        searched = await self._partitions_to_search(topic, partition, broker_id)
        open_txns = [
            OpenTransaction(t, p, state)
            for (t, p), states in (await self.producers(searched)).items()
            for state in states
            if state.current_txn_start_offset >= 0
            and now_ms - state.last_timestamp > max_transaction_timeout_ms
        ]
        if not open_txns:
            return []
        listed = await self.list_transactions(
            producer_ids={o.producer.producer_id for o in open_txns}
        )
        transactional_ids = {t.producer_id: t.transactional_id for t in listed}
        # What each coordinator will write markers to (nothing for an id it forgot).
        will_end: set[tuple[int, str, int]] = set()
        for producer_id, tid in sorted(transactional_ids.items()):
            try:
                described = await self.describe_transaction(tid)
            except KafkaClientError as exc:
                if exc.code != ErrorCode.TRANSACTIONAL_ID_NOT_FOUND:
                    raise
                continue
            will_end |= {(producer_id, t, p) for t, p in described.partitions}
        return [
            o for o in open_txns if (o.producer.producer_id, o.topic, o.partition) not in will_end
        ]

    async def _partitions_to_search(
        self, topic: str | None, partition: int | None, broker_id: int | None
    ) -> list[tuple[str, int]]:
        if topic is not None and partition is not None:
            return [(topic, partition)]
        info = await self.describe_cluster(None if topic is None else [topic])
        return [
            (t.name, p.partition)
            for t in info.topics.values()
            if topic is not None or not t.internal
            for p in t.partitions
            if broker_id is None or broker_id in p.replicas
        ]

    async def abort_transaction(
        self,
        topic: str,
        partition: int,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
    ) -> None:
        """Write an abort marker for the producer's open transaction at the partition,
        as its coordinator would (Kafka's Admin.abortTransaction: WriteTxnMarkers to the
        partition's leader, which needs CLUSTER_ACTION): its records are dropped for
        read_committed readers and the partition's last stable offset moves past them."""
        info = await self.describe_cluster([topic])
        leader = info.topics[topic].partitions[partition].leader
        marker = WriteTxnMarkersRequest.WritableTxnMarker
        request = WriteTxnMarkersRequest(
            markers=[
                marker(
                    producer_id=producer_id,
                    producer_epoch=producer_epoch,
                    transaction_result=False,
                    topics=[
                        marker.WritableTxnMarkerTopic(name=topic, partition_indexes=[partition])
                    ],
                    coordinator_epoch=coordinator_epoch,
                )
            ]
        )
        response = await (await self.broker(leader)).send(request, WRITE_TXN_MARKERS_VERSION)
        (answer,) = response.markers[0].topics[0].partitions
        if answer.error_code:
            raise KafkaClientError(ErrorCode(answer.error_code), f"{topic}-{partition}")
