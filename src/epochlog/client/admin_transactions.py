"""Mixed into AsyncAdmin: what operators ask about transactions (Kafka's
kafka-transactions.sh): ListTransactions from every broker (each coordinates its own
transactional ids), DescribeTransactions from an id's coordinator, DescribeProducers
from a partition's leader."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kafka.protocol.admin import (
    DescribeProducersRequest,
    DescribeTransactionsRequest,
    ListTransactionsRequest,
)
from kafka.protocol.metadata import FindCoordinatorRequest

from epochlog.client.errors import KafkaClientError
from epochlog.protocol.errors import ErrorCode

TRANSACTION_KEY = 1


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


class TransactionAdmin:
    describe_cluster: Any
    broker: Any

    async def list_transactions(self, states: list[str] | None = None) -> list[TransactionListing]:
        info = await self.describe_cluster()
        request = ListTransactionsRequest(state_filters=states or [], producer_id_filters=[])
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
        info = await self.describe_cluster([topic])
        leader = info.topics[topic].partitions[partition].leader
        request = DescribeProducersRequest(
            topics=[
                DescribeProducersRequest.TopicRequest(name=topic, partition_indexes=[partition])
            ]
        )
        (answer,) = (await (await self.broker(leader)).send(request, 0)).topics[0].partitions
        if answer.error_code:
            raise KafkaClientError(ErrorCode(answer.error_code), f"{topic}-{partition}")
        return [
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
