"""A TCP (or TLS) connection whose frames are received straight into their own buffer.

asyncio's StreamReader appends every chunk the socket gives to one growing buffer and
copies each frame out of it again: a 1 MB Produce crossed memory three times before it
was decoded, a third of a broker's time under large batches. Here a frame's buffer is
handed to the transport, which ``recv_into``s it; only what arrives before anyone asks
for it (the next small frame) goes through a scratch buffer. The buffer grows as the
frame arrives and is never zeroed (each byte is received before it is read): it was
allocated at the announced size by ``bytearray(n)``, which zeroes every page, so a peer
that announced 100 MB and sent a kilobyte cost the broker 100 MB of resident memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import socket
import ssl
from collections.abc import Awaitable, Callable, Sequence

# What the transport may read ahead of the reader; beyond this it stops reading until
# the reader catches up (asyncio's StreamReader pauses at twice its limit likewise).
READ_AHEAD_LIMIT = 2 << 20
SCRATCH_BYTES = 256 << 10
# The rest of a frame at least this big is received into the frame itself; a smaller
# rest goes through the scratch buffer, so that one read also takes what follows it.
DIRECT_READ_BYTES = 64 << 10
# A frame's buffer starts at most this big and doubles as it fills. A produced batch is
# about this big: its frame is received into one buffer, each growth costing a read
# and a turn of the loop more.
FIRST_FRAME_BYTES = 1 << 20
SEND_CHUNK = 1 << 20
# A piece written by itself, not copied into a joined buffer first: one more send()
# (a few microseconds) costs less than copying this many bytes.
LARGE_WRITE = 64 << 10


_resize = ctypes.pythonapi.PyByteArray_Resize
_resize.argtypes = (ctypes.py_object, ctypes.c_ssize_t)
_resize.restype = ctypes.c_int


def _frame_buffer(size: int) -> bytearray:
    """A bytearray of ``size`` bytes left as the allocator gives them: ``bytearray(n)``
    zeroes every page first, which ``recv_into`` then overwrites."""
    buffer = bytearray()
    _resize(buffer, size)
    return buffer


class ReceiveProtocol(asyncio.BufferedProtocol):
    """Receives into the frame being read, else into a scratch buffer; and the write
    side's flow control, for ``drain``."""

    def __init__(
        self,
        on_connected: Callable[[ReceiveProtocol], None] | None = None,
        paused: bool = False,
    ) -> None:
        self._on_connected = on_connected
        # A TLS listener reads nothing before its handshake starts: the client's first
        # bytes belong to the TLS layer, not to the scratch buffer.
        self._paused_at_start = paused
        self.transport: asyncio.Transport | None = None
        self._ahead = bytearray()
        self._scratch = memoryview(bytearray(SCRATCH_BYTES))
        self._frame: bytearray | None = None
        self._filled = 0
        self._target = 0  # the frame's announced size: its buffer grows to it
        # Every byte received, for a check that a frame is still arriving.
        self.received = 0
        self._direct = False
        self._waiter: asyncio.Future[None] | None = None
        self._closed = False
        self._error: BaseException | None = None
        self._reading_paused = False
        self._writing_paused = False
        self._drain_waiters: list[asyncio.Future[None]] = []

    # -- asyncio callbacks -----------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        if self._paused_at_start:
            self.transport.pause_reading()  # type: ignore[union-attr]
        if self._on_connected is not None:
            self._on_connected(self)

    def get_buffer(self, sizehint: int) -> memoryview:
        frame = self._frame
        if frame is not None:
            # Room for a direct read whenever so much of the frame is still to come.
            self._grow(frame, DIRECT_READ_BYTES)
        self._direct = frame is not None and len(frame) - self._filled >= DIRECT_READ_BYTES
        if self._direct:
            return memoryview(frame)[self._filled :]  # type: ignore[arg-type]
        return self._scratch

    def buffer_updated(self, nbytes: int) -> None:
        self.received += nbytes
        frame = self._frame
        if self._direct:
            self._filled += nbytes
        else:
            received = self._scratch[:nbytes]
            if frame is not None:
                # A small frame's rest: copied, and what follows it read in the same call.
                take = min(nbytes, self._target - self._filled)
                self._grow(frame, take)
                frame[self._filled : self._filled + take] = received[:take]
                self._filled += take
                received = received[take:]
            if received:
                self._ahead += received
                if len(self._ahead) > READ_AHEAD_LIMIT and not self._reading_paused:
                    self._reading_paused = True
                    self.transport.pause_reading()  # type: ignore[union-attr]
        if frame is not None and self._filled == self._target:
            # Complete: what arrives next (before the reader resumes) must not be
            # offered an empty buffer, which the transport takes for a fault.
            self._frame = None
        if self._frame is None:
            self._wake()

    def _grow(self, frame: bytearray, coming: int) -> None:
        """Room in the frame's buffer for ``coming`` more bytes, doubling it. Only while
        the transport holds no view of it: a resize would fail."""
        needed = min(self._target, self._filled + coming)
        if needed > len(frame):
            _resize(frame, min(self._target, max(needed, 2 * len(frame))))

    def eof_received(self) -> bool:
        self._closed = True
        self._wake()
        # A peer that shut its writing side may still read what it asked for: keep our
        # side open (TLS cannot half-close; its transport closes regardless).
        return self.transport is not None and self.transport.get_extra_info("sslcontext") is None

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._error = exc
        self._wake()
        for waiter in self._drain_waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._drain_waiters.clear()

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        for waiter in self._drain_waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._drain_waiters.clear()

    # -- what the connection asks ----------------------------------------------------

    async def read_exactly(self, n: int) -> bytes | bytearray:
        if len(self._ahead) >= n:
            data = bytes(self._ahead[:n])
            del self._ahead[:n]
            self._maybe_resume_reading()
            return data
        have = len(self._ahead)
        frame = _frame_buffer(max(have, min(n, FIRST_FRAME_BYTES)))
        frame[:have] = self._ahead
        self._ahead.clear()
        self._maybe_resume_reading()
        self._frame, self._filled, self._target = frame, have, n
        try:
            while self._frame is not None:
                if self._closed:
                    raise self._incomplete(frame)
                self._waiter = asyncio.get_running_loop().create_future()
                await self._waiter
        except asyncio.CancelledError:
            # A reader that gives up (a timeout) leaves what came for the next one.
            self._ahead[:0] = frame[: self._filled]
            raise
        finally:
            self._frame, self._waiter = None, None
        return frame

    async def drain(self) -> None:
        if self._closed or self.transport is None or self.transport.is_closing():
            # Let connection_lost run if the close is under way, then report it.
            await asyncio.sleep(0)
            if self._closed:
                raise ConnectionResetError("connection lost")
        if self._writing_paused:
            waiter = asyncio.get_running_loop().create_future()
            self._drain_waiters.append(waiter)
            await waiter
            if self._closed:
                raise ConnectionResetError("connection lost")

    def _incomplete(self, frame: bytearray) -> BaseException:
        if self._error is not None:
            return ConnectionResetError(f"connection lost: {self._error}")
        return asyncio.IncompleteReadError(bytes(frame[: self._filled]), self._target)

    def _maybe_resume_reading(self) -> None:
        if self._reading_paused and len(self._ahead) <= READ_AHEAD_LIMIT:
            self._reading_paused = False
            if self.transport is not None and not self.transport.is_closing():
                self.transport.resume_reading()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)


class StreamConnection:
    """A TCP connection with zero-copy file sends (plain TCP only: TLS encrypts in user
    space, so a file range is read and written through it)."""

    _native_sendfile = True

    def __init__(self, protocol: ReceiveProtocol) -> None:
        transport = protocol.transport
        assert transport is not None
        self._protocol = protocol
        self._transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        tls = transport.get_extra_info("ssl_object")
        self._tls = tls is not None
        self.peer_certificate: bytes | None = (
            tls.getpeercert(binary_form=True) if tls is not None else None
        )
        sock = transport.get_extra_info("socket")
        self._fd: int | None = None
        if sock is not None:
            self._fd = sock.fileno()
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    @property
    def received(self) -> int:
        return self._protocol.received

    async def read_exactly(self, n: int) -> bytes | bytearray:
        return await self._protocol.read_exactly(n)

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self._transport.write(data)

    def writelines(self, buffers: Sequence[bytes | bytearray | memoryview]) -> None:
        """Small pieces joined, large ones written as they are. asyncio's own
        ``writelines`` (3.11) joins every piece first: a copy of each request or
        response in user space, a quarter of a Spark sink task's time."""
        write = self._transport.write
        small: list[bytes | bytearray | memoryview] = []
        for piece in buffers:
            if len(piece) < LARGE_WRITE:
                small.append(piece)
                continue
            if small:
                write(b"".join(small))
                small = []
            write(piece)
        if small:
            write(b"".join(small))

    async def send_file(self, file: object, offset: int, count: int) -> None:
        if self._transport.is_closing():
            # The peer left while the response was prepared (a long-poll fetch).
            raise ConnectionResetError("connection closed before the response was sent")
        fd = file.fileno()  # type: ignore[attr-defined]
        if fd is not None and not self._tls and StreamConnection._native_sendfile:
            sent = self._send_file_now(fd, offset, count)
            offset += sent
            count -= sent
            if not count:
                return
            loop = asyncio.get_running_loop()
            with os.fdopen(os.dup(fd), "rb", buffering=0) as fobj:
                try:
                    await loop.sendfile(self._transport, fobj, offset, count, fallback=False)
                    return
                except (asyncio.SendfileNotAvailableError, NotImplementedError):
                    # Loops without native sendfile (uvloop): copy through user space.
                    StreamConnection._native_sendfile = False
        end = offset + count
        while offset < end:
            chunk = file.pread(min(SEND_CHUNK, end - offset), offset)  # type: ignore[attr-defined]
            if not chunk:
                raise ConnectionError(f"file {file.path} shorter than expected")  # type: ignore[attr-defined]
            self._transport.write(chunk)
            offset += len(chunk)
            await self._protocol.drain()

    def _send_file_now(self, fd: int, offset: int, count: int) -> int:
        """As much of the range as the socket takes now, by ``sendfile`` on its
        descriptor: the rest goes through ``loop.sendfile``, whose set-up (a duplicated
        descriptor, futures, the writer's registration) cost a sixth of the broker's CPU
        under eight consumers of 1 KiB records. Only when nothing is buffered ahead."""
        if self._fd is None or self._transport.get_write_buffer_size():
            return 0
        sent = 0
        try:
            while sent < count:
                n = os.sendfile(self._fd, fd, offset + sent, count - sent)
                if not n:
                    raise ConnectionError(f"file shorter than the range sent from {offset}")
                sent += n
        except BlockingIOError:
            pass
        return sent

    async def drain(self) -> None:
        await self._protocol.drain()

    def close(self) -> None:
        self._transport.close()

    def is_closing(self) -> bool:
        return self._transport.is_closing()


async def serve_streams(
    host: str,
    port: int,
    on_client: Callable[[ReceiveProtocol], Awaitable[None]],
    tls: bool = False,
) -> asyncio.base_events.Server:
    """Accept connections; each runs ``on_client`` in its own task (kept referenced
    here until it ends, as asyncio.start_server does)."""
    loop = asyncio.get_running_loop()
    running: set[asyncio.Task[None]] = set()

    def connected(protocol: ReceiveProtocol) -> None:
        task = loop.create_task(on_client(protocol))
        running.add(task)
        task.add_done_callback(running.discard)

    return await loop.create_server(
        lambda: ReceiveProtocol(connected, paused=tls), host, port, reuse_address=True
    )


async def connect_stream(
    host: str, port: int, context: ssl.SSLContext | None, handshake_timeout_s: float
) -> StreamConnection:
    loop = asyncio.get_running_loop()
    if context is None:
        _, protocol = await loop.create_connection(ReceiveProtocol, host, port)
    else:
        _, protocol = await loop.create_connection(
            ReceiveProtocol,
            host,
            port,
            ssl=context,
            server_hostname=host,
            ssl_handshake_timeout=handshake_timeout_s,
        )
    return StreamConnection(protocol)


async def start_server_tls(
    protocol: ReceiveProtocol, context: ssl.SSLContext, handshake_timeout_s: float
) -> None:
    """The server side of a TLS handshake on an accepted connection: the protocol then
    receives the decrypted stream through the TLS transport."""
    loop = asyncio.get_running_loop()
    assert protocol.transport is not None
    protocol.transport = await loop.start_tls(  # type: ignore[assignment]
        protocol.transport,
        protocol,
        context,
        server_side=True,
        ssl_handshake_timeout=handshake_timeout_s,
    )
