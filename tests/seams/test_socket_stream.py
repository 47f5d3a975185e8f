"""The real network seam's connections: frames received into their own buffers over
loopback, whatever the sizes and however they are split, buffers that grow only as
their frames arrive, and a request header read without copying the frame."""

from __future__ import annotations

import asyncio
import os
import struct
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import trustme
from kafka.protocol.metadata import MetadataRequest

from epochlog.protocol.apis import decode_request_header
from epochlog.seams import Connection, Server, Tls
from epochlog.seams.real import OsFile, SocketNetwork
from epochlog.seams.socket_stream import DIRECT_READ_BYTES, FIRST_FRAME_BYTES, READ_AHEAD_LIMIT


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(scenario(), 60))


async def echo_frames(conn: Connection) -> None:
    """Answer each size-prefixed frame with its length and a digest of its bytes."""
    try:
        while True:
            (size,) = struct.unpack(">i", await conn.read_exactly(4))
            data = await conn.read_exactly(size)
            conn.write(struct.pack(">iI", size, sum(data) & 0xFFFFFFFF))
            await conn.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        conn.close()


async def connected() -> tuple[Server, Connection, Connection]:
    """A loopback server, a client connected to it, and the server's side of that."""
    network = SocketNetwork()
    accepted: asyncio.Queue[Connection] = asyncio.Queue()
    server = await network.serve("127.0.0.1", 0, accepted.put)
    client = await network.connect("127.0.0.1", server.port)
    return server, client, await accepted.get()


def tls_pair() -> tuple[Tls, Tls]:
    """A server's and a client's side of TLS on 127.0.0.1, from a fresh CA."""
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    chain = b"".join(blob.bytes() for blob in cert.cert_chain_pems)
    server = Tls(certificate_chain=chain, private_key=cert.private_key_pem.bytes())
    return server, Tls(trusted=ca.cert_pem.bytes())


@pytest.mark.parametrize("tls", [False, True], ids=["plain", "tls"])
def test_frames_small_and_large_sent_back_to_back_arrive_whole(tls: bool) -> None:
    """Frames above FIRST_FRAME_BYTES grow their buffers as they arrive (over TLS too,
    whose transport fills a buffer in several reads)."""
    sizes = [4, 1, DIRECT_READ_BYTES - 1, DIRECT_READ_BYTES, 3 << 20, 10, READ_AHEAD_LIMIT + 7]
    server_tls, client_tls = tls_pair() if tls else (None, None)

    async def scenario() -> None:
        network = SocketNetwork()
        server = await network.serve("127.0.0.1", 0, echo_frames, server_tls)
        client = await network.connect("127.0.0.1", server.port, client_tls)
        frames = [os.urandom(n) for n in sizes]
        # All at once: the server's reads split and join them as the kernel pleases.
        client.writelines([struct.pack(">i", len(f)) + f for f in frames])
        await client.drain()
        for f in frames:
            size, digest = struct.unpack(">iI", await client.read_exactly(8))
            assert (size, digest) == (len(f), sum(f) & 0xFFFFFFFF)
        client.close()
        server.close()
        await server.wait_closed()

    run(scenario)


def test_a_read_given_up_by_its_reader_leaves_its_bytes_for_the_next() -> None:
    async def scenario() -> None:
        server, client, conn = await connected()
        payload = os.urandom(2 * DIRECT_READ_BYTES)
        client.write(payload[: DIRECT_READ_BYTES + 10])
        await client.drain()
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.3):
                await conn.read_exactly(len(payload))
        client.write(payload[DIRECT_READ_BYTES + 10 :])
        await client.drain()
        assert await conn.read_exactly(len(payload)) == payload
        conn.close()
        client.close()
        server.close()

    run(scenario)


def test_a_read_given_up_while_its_buffer_grew_leaves_its_bytes_for_the_next() -> None:
    async def scenario() -> None:
        server, client, conn = await connected()
        payload = os.urandom(5 * FIRST_FRAME_BYTES)
        client.write(payload[: 3 * FIRST_FRAME_BYTES + 10])
        await client.drain()
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.3):
                await conn.read_exactly(len(payload))
        client.write(payload[3 * FIRST_FRAME_BYTES + 10 :])
        await client.drain()
        assert await conn.read_exactly(len(payload)) == payload
        assert conn.received == len(payload)
        conn.close()
        client.close()
        server.close()

    run(scenario)


def test_a_frame_announced_large_holds_memory_only_for_what_arrived() -> None:
    """A peer that announced 16 MiB and sent a kilobyte once cost 16 MiB at once."""
    announced = 16 << 20
    payload = os.urandom(announced)

    async def until_received(conn: Connection, count: int) -> None:
        while conn.received < count:
            await asyncio.sleep(0.01)

    async def scenario() -> None:
        server, client, conn = await connected()
        tracemalloc.start()
        try:
            reading = asyncio.ensure_future(conn.read_exactly(announced))
            client.write(payload[:1000])
            await asyncio.wait_for(until_received(conn, 1000), 5)
            held = tracemalloc.get_traced_memory()[1]
            assert held <= 2 * FIRST_FRAME_BYTES, f"{held} bytes for 1,000 received"
            # Then in pieces, each received while the buffer grows.
            for start in range(1000, announced, 1 << 20):
                client.write(payload[start : start + (1 << 20)])
                await client.drain()
                await asyncio.wait_for(until_received(conn, min(announced, start + (1 << 20))), 5)
                held = tracemalloc.get_traced_memory()[0]
                assert held <= 2 * conn.received + FIRST_FRAME_BYTES
            assert await asyncio.wait_for(reading, 5) == payload
        finally:
            tracemalloc.stop()
        conn.close()
        client.close()
        server.close()

    run(scenario)


def test_a_peer_that_shuts_its_writing_side_still_gets_its_answers() -> None:
    async def scenario() -> None:
        reader_writer: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
        network = SocketNetwork()
        server = await network.serve("127.0.0.1", 0, echo_frames)
        reader_writer.append(await asyncio.open_connection("127.0.0.1", server.port))
        reader, writer = reader_writer[0]
        frame = os.urandom(100)
        writer.write(struct.pack(">i", 100) + frame)
        writer.write_eof()
        assert await reader.readexactly(8) == struct.pack(">iI", 100, sum(frame))
        assert await reader.read() == b""  # then the server closes: an EOF, not a reset
        writer.close()
        server.close()

    run(scenario)


def test_a_connection_lost_mid_frame_is_an_incomplete_read() -> None:
    async def scenario() -> None:
        server, client, conn = await connected()
        client.write(b"x" * 100)
        await client.drain()
        client.close()
        with pytest.raises((asyncio.IncompleteReadError, ConnectionError)):
            await conn.read_exactly(DIRECT_READ_BYTES * 2)
        server.close()

    run(scenario)


def test_a_request_header_is_read_from_a_bytearray_frame_and_past_the_probe() -> None:
    body = b"\x00" * 1000
    for client_id in ("short", "c" * 5000):
        request = MetadataRequest(topics=[], allow_auto_topic_creation=False)
        request.with_header(correlation_id=9, client_id=client_id)
        frame = bytearray(request.encode(version=4, header=True)) + body
        decoded = decode_request_header(frame, flexible=False)
        assert (decoded.correlation_id, decoded.client_id) == (9, client_id)
        assert bytes(decoded.body[-1000:]) == body


def test_file_ranges_past_what_the_socket_takes_at_once_arrive_whole_between_writes(
    tmp_path: Path,
) -> None:
    """A range goes by sendfile as far as the socket takes it now, and the rest through
    the loop once the reader drains it: nothing is lost, doubled or reordered."""
    content = os.urandom(12 << 20)
    file = OsFile(str(tmp_path / "segment.log"))
    file.append(content)
    ranges = [(0, 5 << 20), (7 << 20, 5 << 20), (100, 1000)]
    expected = b"head" + b"".join(b"mid" + content[o : o + n] for o, n in ranges) + b"tail"

    async def send(conn: Connection) -> None:
        conn.write(b"head")
        for offset, count in ranges:
            conn.write(b"mid")
            await conn.send_file(file, offset, count)
        conn.write(b"tail")

    async def scenario() -> None:
        server, client, conn = await connected()
        sending = asyncio.ensure_future(send(conn))
        await asyncio.sleep(0.2)  # nothing read yet: the first range fills the socket
        assert not sending.done()
        assert await client.read_exactly(len(expected)) == expected
        await sending
        server.close()

    try:
        run(scenario)
    finally:
        file.close()


def test_a_file_range_past_the_end_of_the_file_fails_the_send(tmp_path: Path) -> None:
    file = OsFile(str(tmp_path / "segment.log"))
    file.append(b"x" * 1000)

    async def scenario() -> None:
        server, client, conn = await connected()
        with pytest.raises(ConnectionError):
            await conn.send_file(file, 500, 1000)
        assert await client.read_exactly(500) == b"x" * 500
        server.close()

    try:
        run(scenario)
    finally:
        file.close()
