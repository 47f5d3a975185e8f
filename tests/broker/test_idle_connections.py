"""connections.max.idle.ms: silent connections and stalled frames are closed with a log
line; a connection that keeps sending, or whose request takes longer than that to serve,
is not. request.stall.timeout.ms: a frame that stops arriving is closed sooner; one that
keeps arriving, however slowly, is not."""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from pathlib import Path

import pytest
from inprocess_broker import (
    connect,
    create_topic_via_metadata,
    long_poll_fetch_request,
    run,
    running_broker,
)
from kafka.protocol.metadata import ApiVersionsRequest

IDLE = {"connections.max.idle.ms": "400"}


async def closed_within(conn, seconds: float) -> bool:
    """Whether the broker closes ``conn`` within ``seconds`` (it sends nothing)."""
    try:
        await asyncio.wait_for(conn.read_exactly(1), seconds)
    except (asyncio.IncompleteReadError, ConnectionError):
        return True
    except TimeoutError:
        return False
    raise AssertionError("the broker sent bytes unasked")


def test_a_silent_connection_is_closed_after_the_idle_time_with_a_log_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path, **IDLE) as broker:
            conn = await broker.seams.network.connect("127.0.0.1", broker.port)
            started = time.monotonic()
            assert not await closed_within(conn, 0.2)
            assert await closed_within(conn, 5)
            assert time.monotonic() - started >= 0.4
            conn.close()

    with caplog.at_level(logging.INFO, logger="epochlog.broker"):
        run(scenario)
    assert "closing idle connection from 127.0.0.1" in caplog.text


def test_a_frame_stalled_mid_way_is_closed_after_the_idle_time_with_a_log_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path, **IDLE) as broker:
            conn = await broker.seams.network.connect("127.0.0.1", broker.port)
            conn.write(struct.pack(">i", 100) + b"\x00" * 10)
            await conn.drain()
            assert await closed_within(conn, 5)
            conn.close()

    with caplog.at_level(logging.INFO, logger="epochlog.broker"):
        run(scenario)
    assert "a 100-byte request did not arrive within connections.max.idle.ms" in caplog.text


STALL = {"request.stall.timeout.ms": "300"}


def test_a_frame_that_stops_arriving_is_closed_after_the_stall_timeout_with_a_log_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path, **STALL) as broker:
            conn = await broker.seams.network.connect("127.0.0.1", broker.port)
            conn.write(struct.pack(">i", 100_000) + b"\x00" * 10)
            await conn.drain()
            # Found within twice the stall timeout, ten minutes before the idle one.
            assert await closed_within(conn, 5)
            conn.close()
            assert broker._connections._budget.used == 0

    with caplog.at_level(logging.INFO, logger="epochlog.broker"):
        run(scenario)
    assert "a 100000-byte request stalled for request.stall.timeout.ms" in caplog.text


def test_a_frame_that_keeps_arriving_slowly_is_not_closed(tmp_path: Path) -> None:
    """A byte every 0.15 s: the frame's 14 take 2 s, seven stall timeouts."""
    request = ApiVersionsRequest()
    request.with_header(correlation_id=7, client_id="slow")
    body = bytes(request.encode(version=0, header=True))
    frame = struct.pack(">i", len(body)) + body
    pieces = [frame[i : i + 1] for i in range(len(frame))]

    async def scenario() -> None:
        async with running_broker(tmp_path, **STALL) as broker:
            conn = await broker.seams.network.connect("127.0.0.1", broker.port)
            for piece in pieces[:-1]:
                conn.write(piece)
                await conn.drain()
                await asyncio.sleep(0.15)
            conn.write(pieces[-1])
            (size,) = struct.unpack(">i", await asyncio.wait_for(conn.read_exactly(4), 5))
            assert struct.unpack(">i", (await conn.read_exactly(size))[:4]) == (7,)
            conn.close()

    run(scenario)


def test_a_connection_that_keeps_sending_is_never_idle(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path, **IDLE) as broker:
            conn = await connect(broker)
            for _ in range(12):  # 1.8 s on one connection, 0.15 s apart
                assert (await conn.send(ApiVersionsRequest(), 0)).error_code == 0
                await asyncio.sleep(0.15)
            await conn.close()

    run(scenario)


def test_a_request_served_for_longer_than_the_idle_time_keeps_its_connection(
    tmp_path: Path,
) -> None:
    """A long-poll Fetch of an empty partition waits 2.5 s, past the 1 s idle time; the
    connection's idle time then starts from the answer, not from the request."""
    request = long_poll_fetch_request("t", 2500)

    async def scenario() -> None:
        async with running_broker(tmp_path, **{"connections.max.idle.ms": "1000"}) as broker:
            setup = await connect(broker)
            await create_topic_via_metadata(setup, "t")
            await setup.close()
            conn = await connect(broker)
            started = time.monotonic()
            answer = await conn.send(request, 4)
            assert time.monotonic() - started >= 2.4
            assert answer.responses[0].partitions[0].error_code == 0
            # Idle 0.7 s after the answer, 3.2 s after the request began: still open.
            await asyncio.sleep(0.7)
            assert (await conn.send(ApiVersionsRequest(), 0)).error_code == 0
            await conn.close()

    run(scenario)
