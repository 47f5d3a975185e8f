"""Real implementations of the seams: the OS clock, asyncio sockets, ``os`` files."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import functools
import logging
import os
import random
import shutil
import ssl
import time
from collections.abc import Callable

from epochlog.seams import Connection, ConnectionHandler, Seams, Server, Tls
from epochlog.seams.socket_stream import (
    ReceiveProtocol,
    StreamConnection,
    connect_stream,
    serve_streams,
    start_server_tls,
)

log = logging.getLogger("epochlog.network")
disk_log = logging.getLogger("epochlog.disk")


class RealClock:
    time_ns = staticmethod(time.time_ns)

    def time_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    def timeout(self, seconds: float) -> contextlib.AbstractAsyncContextManager[None]:
        return asyncio.timeout(seconds)

    def schedule(self, seconds: float, callback: Callable[[], object]) -> asyncio.TimerHandle:
        return asyncio.get_running_loop().call_later(seconds, callback)


# Appends this large reserve blocks ahead (an index's 8 or 12 bytes never do) ...
RESERVE_FROM_BYTES = 4096
# ... this far past their end: at most a MiB unused per file being written (4 or 16
# MiB ahead saved no more CPU a GiB written, within 5 %).
RESERVE_AHEAD_BYTES = 1 << 20
_NO_RESERVATIONS = 1 << 62
_FALLOC_FL_KEEP_SIZE = 1


def _libc_fallocate() -> Callable[[int, int, int, int], int] | None:
    """glibc's ``fallocate`` (Python's ``os`` has only ``posix_fallocate``, which grows
    the file); None where there is none."""
    try:
        function = ctypes.CDLL(None, use_errno=True).fallocate
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    function.restype = ctypes.c_int
    return function  # type: ignore[no-any-return]


_fallocate = _libc_fallocate()


class OsFile:
    """A file descriptor opened for pread and append, tracking its own size.

    Large appends write into blocks reserved ahead of the end (``fallocate`` with
    FALLOC_FL_KEEP_SIZE, so the size and what is read do not change): ext4 then skips
    its per-block delayed allocation, a third of a large ``pwrite``'s CPU here. What is
    reserved past the end is given back by ``seal``, ``truncate`` and ``close``."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        self._size = os.fstat(self._fd).st_size
        self._reserved = self._size  # blocks are reserved up to here

    def pread(self, size: int, offset: int) -> bytes:
        return os.pread(self._fd, size, offset)

    def append(self, data: bytes | memoryview) -> int:
        position = self._size
        view = memoryview(data)
        if position + len(view) > self._reserved and len(view) >= RESERVE_FROM_BYTES:
            self._reserve(position + len(view) + RESERVE_AHEAD_BYTES)
        written = 0
        while written < len(view):
            written += os.pwrite(self._fd, view[written:], position + written)
        self._size += written
        return position

    def pwrite(self, data: bytes | memoryview, offset: int) -> None:
        view = memoryview(data)
        if offset < 0 or offset + len(view) > self._size:
            raise ValueError(f"{self.path}: overwrite of [{offset}, +{len(view)}) past the end")
        written = 0
        while written < len(view):
            written += os.pwrite(self._fd, view[written:], offset + written)

    def _reserve(self, end: int) -> None:
        if _fallocate is None:
            self._reserved = _NO_RESERVATIONS
            return
        if _fallocate(self._fd, _FALLOC_FL_KEEP_SIZE, self._size, end - self._size) != 0:
            # Not supported here (EOPNOTSUPP) or no room: plain appends, which say why.
            self._reserved = _NO_RESERVATIONS
            return
        self._reserved = end

    def seal(self) -> None:
        """No more appends are coming: give back the blocks reserved past the end."""
        if self._fd >= 0 and self._size < self._reserved != _NO_RESERVATIONS:
            try:
                os.ftruncate(self._fd, self._size)  # ext4 frees blocks past the (same) size
            except OSError as exc:  # the data is whole: only space stays taken
                disk_log.warning("%s: reserved blocks not given back: %s", self.path, exc)
        self._reserved = self._size

    def truncate(self, size: int) -> None:
        os.ftruncate(self._fd, size)
        self._size = size
        self._reserved = size

    def fsync(self) -> None:
        os.fsync(self._fd)

    def size(self) -> int:
        return self._size

    def close(self) -> None:
        if self._fd >= 0:
            self.seal()
            os.close(self._fd)
            self._fd = -1

    def fileno(self) -> int | None:
        return self._fd if self._fd >= 0 else None


class OsDisk:
    def open(self, path: str) -> OsFile:
        return OsFile(path)

    def read_file(self, path: str) -> bytes:
        with open(path, "rb") as f:
            return f.read()

    def write_atomic(self, path: str, data: bytes) -> None:
        tmp = path + ".tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        self._fsync_dir(os.path.dirname(path) or ".")

    @staticmethod
    def _fsync_dir(path: str) -> None:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def makedirs(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def listdir(self, path: str) -> list[str]:
        return sorted(os.listdir(path))

    def remove(self, path: str) -> None:
        os.remove(path)

    def rename(self, src: str, dst: str) -> None:
        os.replace(src, dst)
        self._fsync_dir(os.path.dirname(dst) or ".")

    def rmtree(self, path: str) -> None:
        shutil.rmtree(path, ignore_errors=True)

    def file_size(self, path: str) -> int:
        return os.path.getsize(path)

    def disk_usage(self, path: str) -> tuple[int, int]:
        usage = shutil.disk_usage(path)
        return usage.total, usage.free

    async def off_loop(self, work: Callable[[], None]) -> None:
        # fsync and write release the GIL: the loop serves requests meanwhile.
        await asyncio.to_thread(work)


class StreamServer:
    def __init__(self, server: asyncio.base_events.Server) -> None:
        self._server = server
        self.port = server.sockets[0].getsockname()[1]

    def close(self) -> None:
        self._server.close()

    async def wait_closed(self) -> None:
        await self._server.wait_closed()


_TLS_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH = {
    "required": ssl.CERT_REQUIRED,
    "requested": ssl.CERT_OPTIONAL,
    "none": ssl.CERT_NONE,
}
# A TLS handshake must finish within this; a peer that stalls in it holds a socket.
TLS_HANDSHAKE_TIMEOUT_S = 10.0


def _load_key_pair(context: ssl.SSLContext, tls: Tls) -> None:
    """The ssl module loads keys only from a path: an anonymous memory file, so the
    (possibly decrypted) key never lands on a disk."""
    fd = os.memfd_create("epochlog-tls", os.MFD_CLOEXEC)
    try:
        os.write(fd, tls.certificate_chain + b"\n" + tls.private_key)
        context.load_cert_chain(f"/proc/self/fd/{fd}", password=tls.key_password or None)
    finally:
        os.close(fd)


def tls_context(tls: Tls, server_side: bool) -> ssl.SSLContext:
    """An SSLContext for one side of a ``Tls`` setting."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER if server_side else ssl.PROTOCOL_TLS_CLIENT)
    versions = [_TLS_VERSIONS[p] for p in tls.protocols]
    context.minimum_version, context.maximum_version = min(versions), max(versions)
    if tls.certificate_chain:
        _load_key_pair(context, tls)
    if tls.trusted:
        context.load_verify_locations(cadata=tls.trusted.decode("ascii"))
    elif not server_side:
        context.load_default_certs(ssl.Purpose.SERVER_AUTH)
    if server_side:
        context.verify_mode = _CLIENT_AUTH[tls.client_auth]
    else:
        context.check_hostname = tls.check_hostname
    return context


class SocketNetwork:
    def __init__(self) -> None:
        self._contexts: dict[tuple[Tls, bool], ssl.SSLContext] = {}

    def _context(self, tls: Tls, server_side: bool) -> ssl.SSLContext:
        """One context per setting and side: building one reads the system's CAs."""
        key = (tls, server_side)
        if key not in self._contexts:
            self._contexts[key] = tls_context(tls, server_side)
        return self._contexts[key]

    async def serve(
        self, host: str, port: int, handler: ConnectionHandler, tls: Tls | None = None
    ) -> Server:
        context = self._context(tls, server_side=True) if tls is not None else None

        async def on_client(protocol: ReceiveProtocol) -> None:
            if context is not None and not await _handshake(protocol, context):
                return
            await handler(StreamConnection(protocol))

        return StreamServer(await serve_streams(host, port, on_client, tls=context is not None))

    async def connect(self, host: str, port: int, tls: Tls | None = None) -> Connection:
        context = self._context(tls, server_side=False) if tls is not None else None
        return await connect_stream(host, port, context, TLS_HANDSHAKE_TIMEOUT_S)


async def _handshake(protocol: ReceiveProtocol, context: ssl.SSLContext) -> bool:
    """The server side of a TLS handshake on an accepted connection; a peer that fails
    it (plaintext bytes, an untrusted or expired certificate) is logged and closed."""
    transport = protocol.transport
    assert transport is not None
    peer = transport.get_extra_info("peername")
    try:
        await start_server_tls(protocol, context, TLS_HANDSHAKE_TIMEOUT_S)
        return True
    except (OSError, TimeoutError, ConnectionError) as exc:
        log.warning("closing connection from %s: TLS handshake failed: %s", peer, exc)
        transport.close()
        return False


def system_random(seed: int | None) -> random.Random:
    return random.Random(seed)


@functools.cache
def this_boot_id() -> str | None:
    """This boot's id: read once, as a process never outlives its boot."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return None


def process_identity(pid: int | None = None) -> str | None:
    """``boot_id:pid:start_time`` of a live process on this host, or None if it is gone.

    The start time guards against a recycled pid; the boot id against a reboot.
    """
    pid = os.getpid() if pid is None else pid
    boot_id = this_boot_id()
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            stat = f.read()
    except OSError:
        return None
    if boot_id is None:
        return None
    # Field 22 (start time) counts from after the parenthesised command name.
    start_time = stat.rsplit(")", 1)[1].split()[19]
    return f"{boot_id}:{pid}:{start_time}"


def real_seams(seed: int | None = None) -> Seams:
    """The production seams: OS clock, asyncio sockets, ``os`` files with fsync."""
    return Seams(
        clock=RealClock(), network=SocketNetwork(), disk=OsDisk(), random=system_random(seed)
    )
