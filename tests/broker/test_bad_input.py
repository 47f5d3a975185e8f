"""Bad input gets an error code or a closed connection with a log line; the broker
keeps serving everyone else and nothing on disk is harmed."""

from __future__ import annotations

import asyncio
import logging
import struct
from pathlib import Path

import pytest
from inprocess_broker import batch, connect, create_topic_via_metadata, produce, run, running_broker
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from epochlog.protocol.errors import ErrorCode


async def raw_exchange(broker, payload: bytes, read_timeout: float = 5.0) -> bytes:
    """Send bytes on a fresh connection; return what comes back before the broker closes."""
    conn = await broker.seams.network.connect("127.0.0.1", broker.port)
    conn.write(payload)
    await conn.drain()
    received = b""
    try:
        while True:
            received += await asyncio.wait_for(conn.read_exactly(1), read_timeout)
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        conn.close()
    return received


async def still_serving(broker) -> None:
    conn = await connect(broker)
    response = await conn.send(ApiVersionsRequest(), 0)
    assert response.error_code == 0
    await conn.close()


def header(api_key: int, version: int, correlation_id: int = 1) -> bytes:
    return struct.pack(">hhih", api_key, version, correlation_id, -1)


def framed(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


@pytest.mark.parametrize(
    ("payload", "logged"),
    [
        (b"\xde\xad\xbe\xef" * 8, "exceeds socket.request.max.bytes"),
        (struct.pack(">i", -5), "exceeds socket.request.max.bytes"),
        (framed(b"\x00"), "has no header"),
        (framed(header(999, 0)), "unknown API key 999"),
        (framed(header(3, 99)), "Metadata v99 is not supported"),
        (framed(header(3, 12) + b"\xff" * 7), "malformed Metadata v12"),
        (framed(header(0, 9) + b"\x00\x01"), "malformed Produce v9"),
    ],
    ids=[
        "garbage",
        "negative-size",
        "no-header",
        "unknown-api",
        "unknown-version",
        "bad-body",
        "cut-body",
    ],
)
def test_bad_frame_closes_connection_with_log_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, payload: bytes, logged: str
) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path, **{"socket.request.max.bytes": "100000"}) as broker:
            with caplog.at_level(logging.WARNING, logger="epochlog.server"):
                assert await raw_exchange(broker, payload) == b""
            assert logged in caplog.text
            await still_serving(broker)

    run(scenario)


def test_newer_api_versions_gets_v0_unsupported_version_answer(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            conn = await broker.seams.network.connect("127.0.0.1", broker.port)
            conn.write(framed(header(18, 77, correlation_id=42)))
            (size,) = struct.unpack(">i", await conn.read_exactly(4))
            data = await conn.read_exactly(size)
            conn.close()
            assert struct.unpack_from(">i", data)[0] == 42
            answer = ApiVersionsResponse.decode(data[4:], version=0)
            assert answer.error_code == ErrorCode.UNSUPPORTED_VERSION
            assert {k.api_key for k in answer.api_keys} >= {0, 1, 2, 3, 18}

    run(scenario)


def test_silent_client_is_closed_after_idle_timeout(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path, **{"connections.max.idle.ms": "300"}) as broker:
            assert await raw_exchange(broker, b"", read_timeout=10) == b""
            await still_serving(broker)

    run(scenario)


def test_client_that_disconnects_mid_frame_harms_nothing(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            conn = await connect(broker)
            await create_topic_via_metadata(conn, "t")
            await produce(conn, "t", batch([b"kept"]))
            half = await broker.seams.network.connect("127.0.0.1", broker.port)
            half.write(struct.pack(">i", 500) + header(0, 9) + b"\x00" * 20)
            await half.drain()
            half.close()
            await asyncio.sleep(0.1)
            assert broker.replica_manager.partition("t", 0).log.log_end_offset == 1
            await still_serving(broker)
            await conn.close()

    run(scenario)


def test_corrupt_or_oversized_batches_are_refused_and_nothing_is_stored(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path, **{"message.max.bytes": "2000"}) as broker:
            conn = await connect(broker)
            await create_topic_via_metadata(conn, "t")
            good = bytearray(batch([b"x" * 10]))
            flipped = bytearray(good)
            flipped[-1] ^= 0xFF
            answers = {
                "crc": (await produce(conn, "t", bytes(flipped))).error_code,
                "cut": (await produce(conn, "t", bytes(good[:-3]))).error_code,
                "large": (await produce(conn, "t", batch([b"y" * 5000]))).error_code,
                "unknown": (await produce(conn, "nope", bytes(good))).error_code,
                "acks": (await produce(conn, "t", bytes(good), acks=2)).error_code,
            }
            assert answers == {
                "crc": ErrorCode.CORRUPT_MESSAGE,
                "cut": ErrorCode.CORRUPT_MESSAGE,
                "large": ErrorCode.MESSAGE_TOO_LARGE,
                "unknown": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                "acks": ErrorCode.INVALID_REQUIRED_ACKS,
            }
            assert broker.replica_manager.partition("t", 0).log.log_end_offset == 0
            assert (await produce(conn, "t", bytes(good))).base_offset == 0
            await conn.close()

    run(scenario)


def test_lengths_running_past_the_frame_close_the_connection_and_create_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Metadata v0 asking for a topic whose name length says 32,767 but carries 2 bytes;
    # JoinGroup v0 whose protocol metadata says 2^31-1 bytes and carries none.
    metadata = framed(header(3, 0) + struct.pack(">ih", 1, 32767) + b"ab")
    join = framed(
        header(11, 0)
        + struct.pack(">h", 1)
        + b"g"
        + struct.pack(">i", 10_000)
        + struct.pack(">h", 0)
        + struct.pack(">h", 8)
        + b"consumer"
        + struct.pack(">i", 1)
        + struct.pack(">h", 5)
        + b"range"
        + struct.pack(">i", 2**31 - 1)
    )

    async def scenario() -> None:
        async with running_broker(tmp_path, offsets_topic_num_partitions="1") as broker:
            with caplog.at_level(logging.WARNING, logger="epochlog.server"):
                assert await raw_exchange(broker, metadata) == b""
                assert await raw_exchange(broker, join) == b""
            assert caplog.text.count("past the frame") == 2
            assert broker.metadata_cache.topic("ab") is None
            assert not broker.coordinator.registry.groups
            await still_serving(broker)

    run(scenario)


def test_partial_frames_of_many_connections_hold_at_most_queued_max_request_bytes(
    tmp_path: Path,
) -> None:
    declared = 2_000_000
    settings = {
        "queued.max.request.bytes": "3000000",
        "connections.max.idle.ms": "2000",
        "socket.request.max.bytes": str(declared),
    }

    async def scenario() -> None:
        async with running_broker(tmp_path, **settings) as broker:
            budget = broker._connections._budget
            senders = []
            for _ in range(10):
                conn = await broker.seams.network.connect("127.0.0.1", broker.port)
                conn.write(struct.pack(">i", declared) + header(18, 0) + b"\x00" * 1_000_000)
                await conn.drain()
                senders.append(conn)
            await asyncio.sleep(0.5)
            # One frame's worth is reserved; the other nine wait unread.
            assert 0 < budget.used <= 3_000_000
            # Stalled frames are dropped after connections.max.idle.ms, freeing the budget.
            await asyncio.sleep(2.5 * 2)
            await asyncio.wait_for(still_serving(broker), 30)
            for conn in senders:
                conn.close()
            await asyncio.sleep(0.2)

    run(scenario)
