"""Poison batches (right header and CRC, records no reader can use) are refused at
produce time with Kafka's error codes, and real consumers read every good record around
them without stalling: before validation, confluent-kafka stalled silently at such an
offset, kafka-python raised and epochlog's consumer failed every poll."""

from __future__ import annotations

import asyncio
import time

import pytest

from epochlog.client import Consumer
from epochlog.client.connection import BrokerConnection
from epochlog.protocol.errors import ErrorCode
from epochlog.seams.real import SocketNetwork
from support.broker import BrokerProcess
from support.clients import (
    confluent_consume,
    confluent_produce,
    create_topic,
    kafka_python_consume,
)
from support.poison import gzip_bomb, poison_batches
from support.records import make_records
from support.requests import produce_request

pytestmark = pytest.mark.interop

HANG_GUARD_S = 60.0


def produce_raw(port: int, topic: str, records: bytes) -> tuple[int, list[int]]:
    """(error code, record_errors' batch indexes) for one Produce v9 of ``records``."""
    request = produce_request(topic, records, timeout_ms=10_000)

    async def send() -> tuple[int, list[int]]:
        conn = await BrokerConnection.open(SocketNetwork(), "127.0.0.1", port)
        try:
            answer = await asyncio.wait_for(conn.send(request, 9), HANG_GUARD_S)
        finally:
            await conn.close()
        part = answer.responses[0].partition_responses[0]
        return part.error_code, [e.batch_index for e in part.record_errors]

    return asyncio.run(send())


def epochlog_consume(bootstrap: str, topic: str, count: int) -> list[tuple[int, bytes]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"})
    try:
        consumer.assign([(topic, 0)])
        got: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + HANG_GUARD_S
        while len(got) < count and time.monotonic() < deadline:
            got.extend((r.offset, r.value) for r in consumer.poll(0.5))
        return got
    finally:
        consumer.close()


def test_poison_batches_are_refused_and_every_client_reads_the_good_records_around_them(
    module_broker: BrokerProcess,
) -> None:
    topic = "poison"
    create_topic(module_broker.bootstrap, topic)
    before = make_records(20, "before")
    after = make_records(20, "after")
    confluent_produce(module_broker.bootstrap, topic, before, "lz4")

    answers = {
        name: produce_raw(module_broker.port, topic, data)
        for name, (data, _) in poison_batches().items()
    }
    answers["gzip-bomb"] = produce_raw(module_broker.port, topic, gzip_bomb())
    expected = {name: code for name, (_, code) in poison_batches().items()}
    expected["gzip-bomb"] = ErrorCode.MESSAGE_TOO_LARGE
    assert {name: code for name, (code, _) in answers.items()} == expected
    assert answers["record-cut-mid-way"][1] == [2]
    assert answers["offset-delta-gap"][1] == [1]

    confluent_produce(module_broker.bootstrap, topic, after, "zstd")
    total = len(before) + len(after)
    values = [r.value for r in before + after]
    assert [g.value for g in confluent_consume(module_broker.bootstrap, topic, total)] == values
    assert [g.value for g in kafka_python_consume(module_broker.bootstrap, topic, total)] == values
    got = epochlog_consume(module_broker.bootstrap, topic, total)
    assert got == list(enumerate(values))
    assert "refused produce to poison-0" in module_broker.tail(400)
