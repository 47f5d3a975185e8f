"""A Produce whose transaction cannot be verified in time (KIP-890): the coordinator is
unknown, or silent. The Produce is answered NOT_ENOUGH_REPLICAS (retried by every
producer) within its own timeout, nothing is stored, and the retry once the coordinator
answers again is appended. In process, with a listening socket that never answers as
the coordinator. And a request whose transactional records are two producers'; and
one question per partition per transaction, not one per batch."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from inprocess_broker import connect, run, running_broker

from epochlog.protocol.errors import ErrorCode
from support.requests import produce_request
from support.txn_requests import add_partitions, init_producer, produce, txn_batch

SETTINGS = {"transaction.state.log.num.partitions": "1", "offsets.topic.num.partitions": "1"}


def test_a_transaction_not_verified_in_time_is_answered_not_enough_replicas(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path, **SETTINGS) as broker:
            await broker.create_topic("orders", 1, 1, {})
            conn = await connect(broker)
            pid, epoch = await init_producer(conn, "tx-slow")
            await add_partitions(conn, "tx-slow", pid, epoch, "orders", [0])
            verifier = broker.txn_verifier
            found = verifier._coordinator_of
            silent = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
            port = silent.sockets[0].getsockname()[1]
            records = txn_batch(pid, epoch, [b"v"])
            try:
                monkeypatch.setattr(verifier, "_coordinator_of", lambda tid: None)
                unknown = await produce(conn, "tx-slow", "orders", 0, records)
                monkeypatch.setattr(verifier, "_coordinator_of", lambda tid: (9, "127.0.0.1", port))
                started = time.monotonic()
                timed_out = await produce(conn, "tx-slow", "orders", 0, records, timeout_ms=1000)
                took = time.monotonic() - started
            finally:
                silent.close()
            assert unknown.error_code == ErrorCode.NOT_ENOUGH_REPLICAS
            assert "COORDINATOR_NOT_AVAILABLE" in unknown.error_message
            assert timed_out.error_code == ErrorCode.NOT_ENOUGH_REPLICAS
            assert "NETWORK_EXCEPTION" in timed_out.error_message
            assert 1.0 <= took < 5.0
            assert broker.replica_manager.partition("orders", 0).log.log_end_offset == 0
            monkeypatch.setattr(verifier, "_coordinator_of", found)
            retried = await produce(conn, "tx-slow", "orders", 0, records)
            assert (retried.error_code, retried.base_offset) == (ErrorCode.NONE, 0)
            await conn.close()

    run(scenario)


def test_transactional_records_of_two_producers_in_one_request_are_all_refused(
    tmp_path: Path,
) -> None:
    """One transactional id writes as one producer: a request whose partitions carry
    two producer ids is refused whole, as Kafka's (INVALID_PRODUCER_ID_MAPPING)."""

    async def scenario() -> None:
        async with running_broker(tmp_path, **SETTINGS) as broker:
            await broker.create_topic("orders", 2, 1, {})
            conn = await connect(broker)
            pid, epoch = await init_producer(conn, "tx-two")
            await add_partitions(conn, "tx-two", pid, epoch, "orders", [0, 1])
            request = produce_request("orders", txn_batch(pid, epoch, [b"a"]), 0)
            request.transactional_id = "tx-two"
            other = produce_request("orders", txn_batch(pid + 1, 0, [b"b"]), 1)
            request.topic_data[0].partition_data += other.topic_data[0].partition_data
            answer = await conn.send(request, 9)
            codes = [p.error_code for p in answer.responses[0].partition_responses]
            assert codes == [ErrorCode.INVALID_PRODUCER_ID_MAPPING] * 2
            for index in (0, 1):
                assert broker.replica_manager.partition("orders", index).log.log_end_offset == 0
            await conn.close()

    run(scenario)


def test_a_transaction_is_verified_once_per_partition_not_every_batch(tmp_path: Path) -> None:
    """The guard is asked for only while no transaction of the producer is open at the
    partition: a transaction's later batches continue it without a question."""

    async def scenario() -> None:
        async with running_broker(tmp_path, **SETTINGS) as broker:
            await broker.create_topic("orders", 2, 1, {})
            conn = await connect(broker)
            pid, epoch = await init_producer(conn, "tx-once")
            await add_partitions(conn, "tx-once", pid, epoch, "orders", [0, 1])

            def questions() -> float:
                asked = broker.metrics_registry.get_sample_value(
                    "kafka_network_requestmetrics_requests_total",
                    {"request": "AddPartitionsToTxn", "version": "4"},
                )
                return asked or 0.0

            for seq in range(4):
                request = produce_request("orders", txn_batch(pid, epoch, [b"a"], seq), 0)
                request.transactional_id = "tx-once"
                other = produce_request("orders", txn_batch(pid, epoch, [b"b"], seq), 1)
                request.topic_data[0].partition_data += other.topic_data[0].partition_data
                answer = await conn.send(request, 9)
                codes = [p.error_code for p in answer.responses[0].partition_responses]
                assert codes == [ErrorCode.NONE] * 2
                assert questions() == 1  # both partitions in the first question
            await conn.close()

    run(scenario)
