"""The three seams through which all time, sockets and files pass.

Core code receives a :class:`Seams` bundle at construction and never touches
``time``, ``asyncio.sleep``, ``socket``, ``open`` or ``random`` itself, so the same
code runs on real I/O and under deterministic simulation.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Protocol


class Clock(Protocol):
    def time_ms(self) -> int:
        """Wall-clock milliseconds since the epoch (record timestamps, retention)."""

    def time_ns(self) -> int:
        """The same wall clock in nanoseconds (``time_ns() // 1_000_000 == time_ms()``),
        for the producer's stamp on every record: the real clock's is ``time.time_ns``
        itself, no Python call between."""

    def monotonic(self) -> float:
        """Seconds on a clock that never goes backwards (timeouts, lag)."""

    async def sleep(self, seconds: float) -> None: ...

    def timeout(self, seconds: float) -> AbstractAsyncContextManager[None]:
        """``async with clock.timeout(s):`` raises TimeoutError when ``s`` pass on this
        clock (for timeouts: ``asyncio.timeout`` would use the event loop's clock)."""

    def schedule(self, seconds: float, callback: Callable[[], object]) -> Cancellable:
        """Call ``callback`` on the running loop once ``seconds`` pass on this clock: a
        timer without a task or a context manager, for checks made rarely."""


class Cancellable(Protocol):
    def cancel(self) -> None: ...


class FileHandle(Protocol):
    """An open file that is appended to, read at offsets and truncated; overwritten in
    place only to repair a damaged range with bytes of the same length."""

    path: str

    def pread(self, size: int, offset: int) -> bytes: ...

    def append(self, data: bytes | memoryview) -> int:
        """Write at the end; returns the position the data starts at."""

    def pwrite(self, data: bytes | memoryview, offset: int) -> None:
        """Overwrite bytes within the file (never past its end)."""

    def truncate(self, size: int) -> None: ...

    def seal(self) -> None:
        """No more appends are coming (until a truncation): space reserved ahead of
        the end, if any, is given back."""

    def fsync(self) -> None: ...

    def size(self) -> int: ...

    def close(self) -> None: ...

    def fileno(self) -> int | None:
        """An OS descriptor for zero-copy sends, or None where there is none."""


class Disk(Protocol):
    def open(self, path: str) -> FileHandle:
        """Open for reading and appending, creating the file if missing."""

    def read_file(self, path: str) -> bytes: ...

    def write_atomic(self, path: str, data: bytes) -> None:
        """Replace a file's contents durably (write, fsync, rename, fsync dir)."""

    def exists(self, path: str) -> bool: ...

    def makedirs(self, path: str) -> None: ...

    def listdir(self, path: str) -> list[str]: ...

    def remove(self, path: str) -> None: ...

    def rename(self, src: str, dst: str) -> None: ...

    def rmtree(self, path: str) -> None: ...

    def file_size(self, path: str) -> int: ...

    def disk_usage(self, path: str) -> tuple[int, int]:
        """(total, usable) bytes of the volume holding ``path``; -1 where unknown."""

    async def off_loop(self, work: Callable[[], None]) -> None:
        """Run disk work that may block for as long as the disk takes (the fsync of a
        whole segment) without holding the event loop: a worker thread on a real disk,
        at once in the simulator, whose replay must not depend on threads."""


@dataclass(frozen=True)
class Tls:
    """One side of TLS, as PEM text (read through the Disk seam, checked by
    ``epochlog.security.tls``): what it presents, what it trusts, what it demands."""

    certificate_chain: bytes = b""  # our certificate then its chain; empty: none
    private_key: bytes = b""
    key_password: str = ""
    trusted: bytes = b""  # CA certificates; empty: the system's (clients only)
    client_auth: str = "none"  # a server's demand: required, requested or none
    check_hostname: bool = True  # a client's check that the certificate names the host
    protocols: tuple[str, ...] = ("TLSv1.2", "TLSv1.3")


class Connection(Protocol):
    peer: str
    # The DER certificate a TLS peer presented and we verified; None otherwise.
    peer_certificate: bytes | None

    @property
    def received(self) -> int:
        """Bytes received so far, read or not: two readings tell whether a peer stalls."""

    async def read_exactly(self, n: int) -> bytes:
        """Raises ConnectionError (or IncompleteRead) when the peer goes away."""

    def write(self, data: bytes | bytearray | memoryview) -> None: ...

    def writelines(self, buffers: Sequence[bytes | bytearray | memoryview]) -> None: ...

    async def send_file(self, file: FileHandle, offset: int, count: int) -> None:
        """Send a file range after what was written, without copying it where possible."""

    async def drain(self) -> None: ...

    def close(self) -> None: ...

    def is_closing(self) -> bool: ...


class Server(Protocol):
    port: int

    def close(self) -> None: ...

    async def wait_closed(self) -> None: ...


ConnectionHandler = Callable[[Connection], Awaitable[None]]


class Network(Protocol):
    async def serve(
        self, host: str, port: int, handler: ConnectionHandler, tls: Tls | None = None
    ) -> Server:
        """Accept connections; with ``tls`` each completes a TLS handshake first (a peer
        that fails it is closed and never reaches ``handler``)."""

    async def connect(self, host: str, port: int, tls: Tls | None = None) -> Connection: ...


class TlsClientNetwork:
    """A Network whose outgoing connections all use one client-side TLS setting: what a
    client with security.protocol=SSL, or a broker's inter-broker side, hands to code
    that only knows ``connect(host, port)``."""

    def __init__(self, network: Network, tls: Tls) -> None:
        self._network = network
        self._tls = tls

    async def serve(
        self, host: str, port: int, handler: ConnectionHandler, tls: Tls | None = None
    ) -> Server:
        return await self._network.serve(host, port, handler, tls)

    async def connect(self, host: str, port: int, tls: Tls | None = None) -> Connection:
        return await self._network.connect(host, port, tls or self._tls)


class Random(Protocol):
    def random(self) -> float: ...

    def randint(self, a: int, b: int) -> int: ...

    def getrandbits(self, k: int) -> int: ...


@dataclass(frozen=True)
class Seams:
    clock: Clock
    network: Network
    disk: Disk
    random: Random
