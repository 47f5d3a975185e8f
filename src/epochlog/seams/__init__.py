"""The three seams through which all time, sockets and files pass (DESIGN §3).

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

    def monotonic(self) -> float:
        """Seconds on a clock that never goes backwards (timeouts, lag)."""

    async def sleep(self, seconds: float) -> None: ...

    def timeout(self, seconds: float) -> AbstractAsyncContextManager[None]:
        """``async with clock.timeout(s):`` raises TimeoutError when ``s`` pass on this
        clock (for timeouts: ``asyncio.timeout`` would use the event loop's clock)."""


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


class Connection(Protocol):
    peer: str

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
    async def serve(self, host: str, port: int, handler: ConnectionHandler) -> Server: ...

    async def connect(self, host: str, port: int) -> Connection: ...


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
