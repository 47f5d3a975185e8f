"""The transaction coordinator's APIs on a real (in-process) broker, raw requests:
FindCoordinator key type 1, InitProducerId fencing, the bad-input answers, and the
operator views. Transactions that write data are tested with real clients elsewhere."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from inprocess_broker import connect, create_topic_via_metadata, run, running_broker
from kafka.protocol.admin import DescribeTransactionsRequest, ListTransactionsRequest
from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.protocol.producer import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
)

from epochlog.client.connection import BrokerConnection
from epochlog.protocol.errors import ErrorCode

SETTINGS = {"transaction.state.log.num.partitions": "3", "offsets.topic.num.partitions": "3"}


async def find_txn_coordinator(conn: BrokerConnection, tid: str) -> Any:
    for _ in range(100):
        answer = await conn.send(FindCoordinatorRequest(key=tid, key_type=1), 3)
        if answer.error_code == ErrorCode.NONE:
            return answer
    raise AssertionError(f"no coordinator for {tid}: {answer}")


async def init(
    conn: BrokerConnection, tid: str, timeout_ms: int = 60_000, pid: int = -1, epoch: int = -1
) -> Any:
    request = InitProducerIdRequest(
        transactional_id=tid,
        transaction_timeout_ms=timeout_ms,
        producer_id=pid,
        producer_epoch=epoch,
    )
    for _ in range(200):
        answer = await conn.send(request, 4)
        if answer.error_code not in (
            ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
            ErrorCode.CONCURRENT_TRANSACTIONS,
        ):
            return answer
        await asyncio.sleep(0.05)
    raise AssertionError(f"InitProducerId kept answering {answer.error_code}")


def add_partitions(tid: str, pid: int, epoch: int, topic: str, parts: list[int]) -> Any:
    return AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=tid,
        v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[
            AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=topic, partitions=parts)
        ],
    )


def from_leader(
    tid: str, pid: int, epoch: int, topic: str, parts: list[int], verify_only: bool = True
) -> Any:
    """AddPartitionsToTxn v4, as a partition leader sends it (KIP-890)."""
    return AddPartitionsToTxnRequest(
        transactions=[
            AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction(
                transactional_id=tid,
                producer_id=pid,
                producer_epoch=epoch,
                verify_only=verify_only,
                topics=[
                    AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=topic, partitions=parts)
                ],
            )
        ]
    )


def v4_codes(answer: Any) -> dict[str, dict[tuple[str, int], int]]:
    return {
        txn.transactional_id: {
            (t.name, p.partition_index): p.partition_error_code
            for t in txn.topic_results
            for p in t.results_by_partition
        }
        for txn in answer.results_by_transaction
    }


def partition_codes(answer: Any) -> dict[tuple[str, int], int]:
    return {
        (t.name, p.partition_index): p.partition_error_code
        for t in answer.results_by_topic_v3_and_below
        for p in t.results_by_partition
    }


def test_find_coordinator_key_type_1_creates_the_transaction_state_topic(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path, **SETTINGS) as broker:
            conn = await connect(broker)
            answer = await find_txn_coordinator(conn, "tx-a")
            assert (answer.node_id, answer.port) == (0, broker.port)
            topic = broker.metadata_cache.topic("__transaction_state")
            assert topic is not None and len(topic.partitions) == 3
            await conn.close()

    run(scenario)


def test_init_producer_id_bumps_the_epoch_and_fences_the_previous_holder(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path, **SETTINGS) as broker:
            conn = await connect(broker)
            await create_topic_via_metadata(conn, "orders")
            await find_txn_coordinator(conn, "tx-b")
            first = await init(conn, "tx-b")
            assert first.error_code == ErrorCode.NONE and first.producer_epoch == 0
            second = await init(conn, "tx-b")
            assert (second.producer_id, second.producer_epoch) == (first.producer_id, 1)
            # The first holder can no longer add partitions or end a transaction.
            stale = await conn.send(add_partitions("tx-b", first.producer_id, 0, "orders", [0]), 3)
            assert set(partition_codes(stale).values()) == {ErrorCode.PRODUCER_FENCED}
            stale_v1 = await conn.send(
                add_partitions("tx-b", first.producer_id, 0, "orders", [0]), 1
            )
            assert set(partition_codes(stale_v1).values()) == {ErrorCode.INVALID_PRODUCER_EPOCH}
            end = EndTxnRequest(
                transactional_id="tx-b",
                producer_id=first.producer_id,
                producer_epoch=0,
                committed=True,
            )
            assert (await conn.send(end, 3)).error_code == ErrorCode.PRODUCER_FENCED
            # KIP-360: the holder of epoch 1 re-initialises with it and gets epoch 2.
            third = await init(conn, "tx-b", pid=second.producer_id, epoch=1)
            assert (third.producer_id, third.producer_epoch) == (first.producer_id, 2)
            fenced = await init(conn, "tx-b", pid=first.producer_id, epoch=0)
            assert fenced.error_code == ErrorCode.PRODUCER_FENCED
            await conn.close()

    run(scenario)


def test_transaction_requests_with_bad_input_get_kafkas_errors(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path, **SETTINGS) as broker:
            conn = await connect(broker)
            await create_topic_via_metadata(conn, "orders")
            await find_txn_coordinator(conn, "tx-c")
            too_long = await init(conn, "tx-c", timeout_ms=900_001)
            assert too_long.error_code == ErrorCode.INVALID_TRANSACTION_TIMEOUT
            assert "tx-c" not in broker.txn_coordinator.state.transactions
            holder = await init(conn, "tx-c")
            pid = holder.producer_id
            # Another producer id, an unknown transactional id, an unknown topic.
            wrong_id = await conn.send(add_partitions("tx-c", pid + 1, 0, "orders", [0]), 3)
            assert set(partition_codes(wrong_id).values()) == {
                ErrorCode.INVALID_PRODUCER_ID_MAPPING
            }
            unknown_tid = await conn.send(add_partitions("nobody", pid, 0, "orders", [0]), 3)
            assert set(partition_codes(unknown_tid).values()) <= {
                ErrorCode.INVALID_PRODUCER_ID_MAPPING,
                ErrorCode.NOT_COORDINATOR,
            }
            request = AddPartitionsToTxnRequest(
                v3_and_below_transactional_id="tx-c",
                v3_and_below_producer_id=pid,
                v3_and_below_producer_epoch=0,
                v3_and_below_topics=[
                    AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(
                        name="orders", partitions=[0]
                    ),
                    AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name="nope", partitions=[0]),
                ],
            )
            mixed = partition_codes(await conn.send(request, 3))
            assert mixed == {
                ("orders", 0): ErrorCode.OPERATION_NOT_ATTEMPTED,
                ("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            }
            # Nothing changed: no transaction is open, so a commit is an invalid state.
            assert broker.txn_coordinator.state.transactions["tx-c"].partitions == frozenset()
            commit = EndTxnRequest(
                transactional_id="tx-c", producer_id=pid, producer_epoch=0, committed=True
            )
            assert (await conn.send(commit, 3)).error_code == ErrorCode.INVALID_TXN_STATE
            no_group = AddOffsetsToTxnRequest(
                transactional_id="tx-c", producer_id=pid, producer_epoch=0, group_id=""
            )
            assert (await conn.send(no_group, 3)).error_code == ErrorCode.INVALID_GROUP_ID
            await conn.close()

    run(scenario)


def test_describe_and_list_transactions_show_an_open_transaction(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path, **SETTINGS) as broker:
            conn = await connect(broker)
            await create_topic_via_metadata(conn, "orders")
            await find_txn_coordinator(conn, "tx-d")
            holder = await init(conn, "tx-d", timeout_ms=30_000)
            added = await conn.send(add_partitions("tx-d", holder.producer_id, 0, "orders", [0]), 3)
            assert set(partition_codes(added).values()) == {ErrorCode.NONE}
            described = await conn.send(
                DescribeTransactionsRequest(transactional_ids=["tx-d", "nobody"]), 0
            )
            one, missing = described.transaction_states
            assert (one.error_code, one.transaction_state) == (0, "Ongoing")
            assert (one.producer_id, one.transaction_timeout_ms) == (holder.producer_id, 30_000)
            assert [(t.topic, list(t.partitions)) for t in one.topics] == [("orders", [0])]
            assert missing.error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
            listed = await conn.send(
                ListTransactionsRequest(state_filters=["Ongoing", "Bogus"], producer_id_filters=[]),
                0,
            )
            assert [
                (s.transactional_id, s.transaction_state) for s in listed.transaction_states
            ] == [("tx-d", "Ongoing")]
            assert list(listed.unknown_state_filters) == ["Bogus"]
            await conn.close()

    run(scenario)


def test_idle_transactional_ids_expire_after_the_expiration_time(tmp_path: Path) -> None:
    settings = {
        **SETTINGS,
        "transactional.id.expiration.ms": "500",
        "transaction.remove.expired.transaction.cleanup.interval.ms": "200",
    }

    async def scenario() -> None:
        async with running_broker(tmp_path, **settings) as broker:
            conn = await connect(broker)
            await find_txn_coordinator(conn, "tx-e")
            assert (await init(conn, "tx-e")).error_code == ErrorCode.NONE
            request = DescribeTransactionsRequest(transactional_ids=["tx-e"])
            for _ in range(100):
                (state,) = (await conn.send(request, 0)).transaction_states
                if state.error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND:
                    break
                await asyncio.sleep(0.1)
            assert state.error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
            await conn.close()

    run(scenario)


def test_verify_only_answers_whether_each_partition_is_in_the_transaction(tmp_path: Path) -> None:
    """AddPartitionsToTxn v4 with verify_only, a partition leader's question before it
    appends a transaction's first batch there (KIP-890): nothing is added by asking."""

    async def scenario() -> None:
        async with running_broker(tmp_path, **SETTINGS) as broker:
            await broker.create_topic("orders", 2, 1, {})
            conn = await connect(broker)
            await find_txn_coordinator(conn, "tx-v")
            pid = (await init(conn, "tx-v")).producer_id
            await conn.send(add_partitions("tx-v", pid, 0, "orders", [0]), 3)

            async def ask(tid: str, asked_pid: int, epoch: int, parts: list[int]) -> Any:
                answer = await conn.send(from_leader(tid, asked_pid, epoch, "orders", parts), 4)
                assert answer.error_code == ErrorCode.NONE
                return v4_codes(answer)[tid]

            assert await ask("tx-v", pid, 0, [0, 1]) == {
                ("orders", 0): ErrorCode.NONE,
                ("orders", 1): ErrorCode.INVALID_TXN_STATE,
            }
            assert set((await ask("tx-v", pid + 1, 0, [0])).values()) == {
                ErrorCode.INVALID_PRODUCER_ID_MAPPING
            }
            assert set((await ask("tx-v", pid, 1, [0])).values()) == {ErrorCode.PRODUCER_FENCED}
            assert await ask("tx-v", pid, 0, [0, 7]) == {
                ("orders", 0): ErrorCode.OPERATION_NOT_ATTEMPTED,
                ("orders", 7): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            }
            assert broker.txn_coordinator.state.transactions["tx-v"].partitions == {("orders", 0)}
            # Without verify_only, v4 adds as the client versions do.
            added = await conn.send(from_leader("tx-v", pid, 0, "orders", [1], False), 4)
            assert v4_codes(added) == {"tx-v": {("orders", 1): ErrorCode.NONE}}
            assert await ask("tx-v", pid, 0, [1]) == {("orders", 1): ErrorCode.NONE}
            await conn.close()

    run(scenario)
