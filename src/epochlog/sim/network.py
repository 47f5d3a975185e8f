"""An in-memory network for the Network seam: connections that keep TCP's promises
(bytes arrive in order, once, or the connection breaks) with a seeded latency, and
faults a simulation can inject (partitions, resets)."""

from __future__ import annotations

import asyncio
import contextvars
from collections import deque
from collections.abc import Callable, Sequence

from epochlog.seams import (
    Clock,
    Connection,
    ConnectionHandler,
    FileHandle,
    Random,
    Server,
    Tls,
)
from epochlog.seams.tasks import BackgroundTasks

Address = tuple[str, int]
FIRST_PORT = 40000


def _refuse_tls(tls: Tls | None) -> None:
    """The simulated network carries bytes, not TLS: a simulation runs PLAINTEXT
    listeners only, and says so rather than pretending to encrypt."""
    if tls is not None:
        raise ValueError("the simulated network has no TLS: use PLAINTEXT listeners")


class SimConnection:
    """One end of a simulated TCP connection."""

    def __init__(self, network: SimNetwork, local: Address, peer: Address) -> None:
        self._network = network
        self.local = local
        self.peer = f"{peer[0]}:{peer[1]}"
        self.peer_certificate: bytes | None = None
        self.remote: SimConnection | None = None
        self._buffer = bytearray()
        self.received = 0
        self._arrived = asyncio.Event()
        self._eof = False
        self._closed = False
        # What this end sent, in order, with when it arrives (never before what was sent
        # earlier: timers due at the same moment may run in any order, so one queue).
        self._in_flight: deque[tuple[float, bytes | None]] = deque()

    async def read_exactly(self, n: int) -> bytes:
        while len(self._buffer) < n:
            if self._eof:
                partial = bytes(self._buffer)
                self._buffer.clear()
                raise asyncio.IncompleteReadError(partial, n)
            self._arrived.clear()
            await self._arrived.wait()
        data = bytes(self._buffer[:n])
        del self._buffer[:n]
        return data

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._closed:
            raise ConnectionResetError("connection closed")
        self._send(bytes(data))

    def writelines(self, buffers: Sequence[bytes | bytearray | memoryview]) -> None:
        self.write(b"".join(bytes(b) for b in buffers))

    async def send_file(self, file: FileHandle, offset: int, count: int) -> None:
        self.write(file.pread(count, offset))

    async def drain(self) -> None:
        await asyncio.sleep(0)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._send(None)
        # As a real transport's close: this end's own reader is woken and finds the
        # connection ended (what already arrived can still be read).
        self._deliver(None)

    def is_closing(self) -> bool:
        return self._closed

    def reset(self) -> None:
        """Both ends see the connection break now (a fault)."""
        for end in (self, self.remote):
            if end is not None:
                end._closed = True
                end._deliver(None)

    def _send(self, data: bytes | None) -> None:
        if self.remote is None:
            return
        loop = asyncio.get_running_loop()
        arrival = loop.time() + self._network.latency_s()
        if self._in_flight:
            arrival = max(arrival, self._in_flight[-1][0])
        self._in_flight.append((arrival, data))
        # Bytes on the wire belong to no host: they arrive even if the sender is paused.
        loop.call_at(arrival, self._arrive, arrival, context=contextvars.Context())

    def _arrive(self, due: float) -> None:
        # Up to what this timer was set for (asyncio may run it a hair early).
        while self._in_flight and self._in_flight[0][0] <= due:
            _, data = self._in_flight.popleft()
            if self.remote is not None:
                self.remote._deliver(data, self.local)

    def _deliver(self, data: bytes | None, sender: Address | None = None) -> None:
        if self._eof:
            return
        if data is None or (sender is not None and self._network.blocked(sender, self.local)):
            self._eof = True
        else:
            self._buffer += data
            self.received += len(data)
        self._arrived.set()


class SimServer:
    def __init__(self, network: SimNetwork, address: Address) -> None:
        self._network = network
        self.address = address
        self.port = address[1]
        self._closed = asyncio.Event()

    def close(self) -> None:
        self._network.stop_listening(self.address)
        self._closed.set()

    async def wait_closed(self) -> None:
        await self._closed.wait()


class SimNetwork:
    """Every simulated host's sockets. Latency is uniform in ``latency_ms``; a blocked
    pair of hosts sees its connections break (a partition: TCP would time out)."""

    def __init__(self, clock: Clock, random: Random, latency_ms: tuple[int, int] = (0, 2)):
        self._clock = clock
        self._random = random
        self._latency_ms = latency_ms
        # Each listener with the context it was opened in: its connections' handlers
        # are tasks of the listening host.
        self._listeners: dict[Address, tuple[ConnectionHandler, contextvars.Context]] = {}
        self._connections: list[SimConnection] = []
        self._blocked: set[tuple[str, str]] = set()
        self._isolated: set[str] = set()
        self._next_port = FIRST_PORT
        self._tasks = BackgroundTasks()

    def latency_s(self) -> float:
        low, high = self._latency_ms
        return self._random.randint(low, high) / 1000

    def blocked(self, sender: Address, receiver: Address) -> bool:
        return self._cut(sender[0], receiver[0])

    def _cut(self, a: str, b: str) -> bool:
        return (a, b) in self._blocked or bool({a, b} & self._isolated)

    async def serve(
        self, host: str, port: int, handler: ConnectionHandler, tls: Tls | None = None
    ) -> Server:
        _refuse_tls(tls)
        if port == 0:
            port = self._next_port
            self._next_port += 1
        address = (host, port)
        if address in self._listeners:
            raise OSError(f"address already in use: {host}:{port}")
        self._listeners[address] = (handler, contextvars.copy_context())
        return SimServer(self, address)

    def stop_listening(self, address: Address) -> None:
        self._listeners.pop(address, None)

    def host(self, name: str) -> HostNetwork:
        """The network as host ``name`` sees it (its connections come from ``name``)."""
        return HostNetwork(self, name)

    async def connect(
        self, host: str, port: int, source: str = "client", tls: Tls | None = None
    ) -> Connection:
        _refuse_tls(tls)
        await self._clock.sleep(self.latency_s())
        listener = self._listeners.get((host, port))
        client_host = source
        if listener is None or self._cut(client_host, host):
            raise ConnectionRefusedError(f"connection refused: {host}:{port}")
        handler, context = listener
        local = (client_host, self._next_port)
        self._next_port += 1
        client = SimConnection(self, local, (host, port))
        server = SimConnection(self, (host, port), local)
        client.remote, server.remote = server, client
        self._connections += [client, server]
        context.run(self._tasks.spawn, handler(server))
        return client

    def partition(self, a: str, b: str) -> None:
        """Hosts ``a`` and ``b`` can no longer talk; their open connections break."""
        self._blocked |= {(a, b), (b, a)}
        self._reset_where(lambda ends: ends == {a, b})

    def isolate(self, host: str) -> None:
        """``host`` can talk to no one; its open connections break."""
        self._isolated.add(host)
        self._reset_where(lambda ends: host in ends)

    def crash(self, host: str) -> None:
        """``host``'s process died: its listeners close and its connections break."""
        for address in [a for a in self._listeners if a[0] == host]:
            del self._listeners[address]
        self._reset_where(lambda ends: host in ends)

    def heal(self) -> None:
        self._blocked.clear()
        self._isolated.clear()

    def _reset_where(self, touches: Callable[[set[str]], bool]) -> None:
        for conn in self._connections:
            if touches({conn.local[0], conn.peer.rsplit(":", 1)[0]}):
                conn.reset()
        self._connections = [c for c in self._connections if not c.is_closing()]


class HostNetwork:
    """The Network seam of one simulated host."""

    def __init__(self, network: SimNetwork, name: str) -> None:
        self.network = network
        self.name = name

    async def serve(
        self, host: str, port: int, handler: ConnectionHandler, tls: Tls | None = None
    ) -> Server:
        return await self.network.serve(host, port, handler, tls)

    async def connect(self, host: str, port: int, tls: Tls | None = None) -> Connection:
        return await self.network.connect(host, port, self.name, tls)
