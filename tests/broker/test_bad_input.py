"""Bad input gets an error code or a closed connection with a log line; the broker
keeps serving everyone else and nothing on disk is harmed."""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from inprocess_broker import (
    batch,
    connect,
    create_topic_via_metadata,
    delete_topic,
    long_poll_fetch_request,
    produce,
    run,
    running_broker,
)
from kafka.protocol.admin import CreatePartitionsRequest, CreateTopicsRequest
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


def long_poll_fetch(topic: str) -> bytes:
    """A framed Fetch v4 that waits up to 5 s for a first byte of ``topic``."""
    request = long_poll_fetch_request(topic, 5000)
    request.with_header(correlation_id=1, client_id="leaver")
    return framed(bytes(request.encode(version=4, header=True)))


def test_client_leaving_during_a_long_poll_fetch_is_logged_at_debug_without_traceback(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The fetch completes after its client left: the answer finds a closed transport,
    which is an ordinary disconnect, not an internal error."""

    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            conn = await connect(broker)
            await create_topic_via_metadata(conn, "t")
            with caplog.at_level(logging.DEBUG, logger="epochlog.server"):
                for _ in range(5):
                    leaver = await broker.seams.network.connect("127.0.0.1", broker.port)
                    leaver.write(long_poll_fetch("t"))
                    await leaver.drain()
                    await asyncio.sleep(0.05)
                    leaver.close()
                await asyncio.sleep(0.1)
                await produce(conn, "t", batch([b"wakes the fetches"]))
                await asyncio.sleep(0.5)
            server_records = [r for r in caplog.records if r.name == "epochlog.server"]
            assert not [r for r in server_records if r.levelno >= logging.INFO], caplog.text
            assert not [r for r in server_records if r.exc_info], caplog.text
            assert any("closed" in r.getMessage() for r in server_records)
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


async def until(condition: Callable[[], bool]) -> None:
    while not condition():
        await asyncio.sleep(0.01)


async def closed_by_broker(conn: Any) -> bool:
    try:
        await conn.read_exactly(1)
    except (asyncio.IncompleteReadError, ConnectionError):
        return True
    return False


async def hostage(broker: Any, announced: int) -> Any:
    """A connection that announces an ``announced``-byte ApiVersions, sends its header
    and a little more, and stalls."""
    conn = await broker.seams.network.connect("127.0.0.1", broker.port)
    conn.write(struct.pack(">i", announced) + header(18, 0) + b"\x00" * 1000)
    await conn.drain()
    return conn


def test_stalled_frames_of_many_connections_hold_in_turn_at_most_what_large_ones_may(
    tmp_path: Path,
) -> None:
    budget_bytes = 3_000_000
    settings = {
        "queued.max.request.bytes": str(budget_bytes),
        "socket.request.max.bytes": str(budget_bytes // 2),
        "request.stall.timeout.ms": "300",
    }

    async def scenario() -> None:
        async with running_broker(tmp_path, **settings) as broker:
            budget = broker._connections._budget
            senders = [await hostage(broker, budget_bytes // 2) for _ in range(4)]
            await asyncio.wait_for(until(lambda: budget.used > 0), 5)
            # One is admitted: a second would pass three quarters of the budget.
            assert budget.large == budget.used == budget_bytes // 2
            await asyncio.wait_for(still_serving(broker), 5)
            # Each is closed once stalled, and the next admitted, until none is left.
            for conn in senders:
                assert await asyncio.wait_for(closed_by_broker(conn), 10)
                conn.close()
            await asyncio.wait_for(until(lambda: budget.used == 0), 5)
            await still_serving(broker)

    run(scenario)


def test_a_frame_above_half_the_budget_closes_the_connection_with_a_log_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path, **{"queued.max.request.bytes": "100000"}) as broker:
            assert await raw_exchange(broker, struct.pack(">i", 50_001) + header(18, 0)) == b""
            await still_serving(broker)

    with caplog.at_level(logging.WARNING, logger="epochlog.server"):
        run(scenario)
    assert "requests above 50000 bytes (half of queued.max.request.bytes=100000)" in caplog.text
    assert "request of 50001 bytes exceeds queued.max.request.bytes/2=50000" in caplog.text


def test_a_large_request_waits_for_stalled_ones_while_small_ones_are_served(
    tmp_path: Path,
) -> None:
    """Two stalled frames hold all that large ones may: a 100 KB Produce waits until
    the stall timeout closes them; ApiVersions meanwhile is answered at once."""
    settings = {
        "queued.max.request.bytes": "400000",
        "request.stall.timeout.ms": "2000",
    }

    async def scenario() -> None:
        async with running_broker(tmp_path, **settings) as broker:
            budget = broker._connections._budget
            conn = await connect(broker)
            await create_topic_via_metadata(conn, "t")
            senders = [await hostage(broker, 150_000) for _ in range(2)]
            await asyncio.wait_for(until(lambda: budget.large == budget.large_limit), 5)
            waiting = asyncio.ensure_future(produce(conn, "t", batch([b"x" * 100_000])))
            await asyncio.wait_for(still_serving(broker), 1)
            assert not waiting.done()
            assert (await asyncio.wait_for(waiting, 10)).error_code == ErrorCode.NONE
            for sender in senders:
                assert await asyncio.wait_for(closed_by_broker(sender), 5)
                sender.close()
            await conn.close()

    run(scenario)


def _create_topics(*topics: tuple[str, int]) -> CreateTopicsRequest:
    return CreateTopicsRequest(
        topics=[
            CreateTopicsRequest.CreatableTopic(
                name=name, num_partitions=n, replication_factor=1, assignments=[], configs=[]
            )
            for name, n in topics
        ],
        timeout_ms=30_000,
        validate_only=False,
    )


def test_requests_for_too_many_partitions_are_refused_whole_before_any_work(
    tmp_path: Path,
) -> None:
    """Kafka's controller limit (controller.max.records.per.batch, 10,000): a million
    partitions once froze a broker long enough to lose its metastore session."""

    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            conn = await connect(broker)
            million = await conn.send(_create_topics(("huge", 1_000_000)), 4)
            split = await conn.send(_create_topics(("a", 6000), ("b", 6000)), 4)
            assert [t.error_code for t in million.topics + split.topics] == [
                ErrorCode.POLICY_VIOLATION
            ] * 3
            assert "Excessively large number of partitions" in million.topics[0].error_message
            assert (await conn.send(_create_topics(("small", 2)), 4)).topics[0].error_code == 0
            grow = CreatePartitionsRequest(
                topics=[
                    CreatePartitionsRequest.CreatePartitionsTopic(
                        name="small", count=20_000, assignments=None
                    )
                ],
                timeout_ms=30_000,
                validate_only=False,
            )
            grown = await conn.send(grow, 1)
            assert grown.results[0].error_code == ErrorCode.POLICY_VIOLATION
            assert {t.name for t in broker.metadata_cache.topics()} == {"small"}
            assert len(broker.metadata_cache.topic("small").partitions) == 2
            await still_serving(broker)
            await conn.close()

    run(scenario)


def test_a_large_create_topics_leaves_the_broker_answering_meanwhile(tmp_path: Path) -> None:
    """Heavy admin work goes in steps: while 2,000 partitions are created (a directory
    and files each, seconds in all on a slow disk), and then deleted, the broker's loop
    is never held for long, and ApiVersions from another client is answered. The holds
    are counted in the loop thread's own CPU time: a machine busy with other tests
    stretches wall time without the broker holding its loop any longer."""

    async def longest_waits(broker: Any, work: Awaitable[Any]) -> tuple[Any, float, float]:
        """``work``'s result, the longest the loop was held, the longest ApiVersions."""
        other = await connect(broker)
        task = asyncio.ensure_future(work)
        longest_stall = longest_answer = 0.0
        while not task.done():
            started = time.thread_time()
            await other.send(ApiVersionsRequest(), 0)
            longest_answer = max(longest_answer, time.thread_time() - started)
            started = time.thread_time()
            await asyncio.sleep(0.01)
            longest_stall = max(longest_stall, time.thread_time() - started)
        await other.close()
        return await task, longest_stall, longest_answer

    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            admin = await connect(broker)
            hosted = broker.replica_manager.partitions

            async def create() -> int:
                answer = await admin.send(_create_topics(("wide", 2000)), 4)
                await until(lambda: len(hosted()) == 2000)
                return int(answer.topics[0].error_code)

            async def delete() -> int:
                code = await delete_topic(admin, "wide")
                await until(lambda: not hosted())
                return code

            for work in (create(), delete()):
                code, stall, answer = await longest_waits(broker, work)
                assert code == ErrorCode.NONE
                assert stall < 0.5, f"the loop was held {stall:.2f} s"
                assert answer < 2.0, f"ApiVersions waited {answer:.2f} s"
            await admin.close()

    asyncio.run(asyncio.wait_for(scenario(), 300))
