"""A request whose caller gave up (cancelled, e.g. by a timeout) must not break the
connection: its late answer is dropped and later requests are answered."""

from __future__ import annotations

import asyncio
from pathlib import Path

from inprocess_broker import run, running_broker
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest

from epochlog.client.connection import BrokerConnection


def test_a_late_answer_to_a_cancelled_request_is_dropped(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            conn = await BrokerConnection.open(broker.seams.network, "127.0.0.1", broker.port)
            try:
                abandoned = asyncio.ensure_future(conn.send(MetadataRequest(topics=None), 1))
                await asyncio.sleep(0)  # the request is written; its answer is on the way
                abandoned.cancel()
                answer = await asyncio.wait_for(conn.send(ApiVersionsRequest(), 0), 30)
                assert answer.error_code == 0
                assert not conn.closed
            finally:
                await conn.close()

    run(scenario)
