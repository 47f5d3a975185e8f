"""The client side of SASL (KIP-152): SaslHandshake v1 then SaslAuthenticate tokens on
a fresh connection, before anything else is sent on it. ``SaslClientNetwork`` does it
for every connection a client opens, so producers, consumers, admin clients and a
broker's replica fetchers and transaction markers all authenticate the same way. Its
connections know when their session ends (KIP-368), so the code that sends on them
can re-authenticate in time (``SaslConnection.reauthentication_due``)."""

from __future__ import annotations

import struct
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from epochlog.protocol.apis import decode_response
from epochlog.protocol.errors import ErrorCode
from epochlog.seams import Clock, Connection, ConnectionHandler, FileHandle, Network, Server, Tls
from epochlog.settings.security import PLAIN

_SIZE = struct.Struct(">i")
_AUTHENTICATE_VERSION = 1
# Re-authenticate once this share of a session's lifetime has passed (librdkafka and
# the Java client pick a moment between 85% and 95%).
_RENEW_AT = 0.85

# Sends one SASL request and returns its decoded response.
Call = Callable[[Any, Any, int], Awaitable[Any]]


@dataclass(frozen=True)
class SaslCredentials:
    """What a client authenticates with: mechanism, username, password."""

    mechanism: str
    username: str
    password: str


class SaslAuthenticationError(ConnectionError):
    """The broker refused the mechanism or the credentials."""


async def _exchange(conn: Connection, request: Any, response_class: Any, version: int) -> Any:
    request.with_header(correlation_id=0, client_id="epochlog")
    payload = bytes(request.encode(version=version, header=True))
    conn.writelines([_SIZE.pack(len(payload)), payload])
    await conn.drain()
    (size,) = _SIZE.unpack(await conn.read_exactly(4))
    return decode_response(response_class, version, await conn.read_exactly(size))


async def _token(call: Call, token: bytes) -> tuple[bytes, int]:
    response = await call(
        SaslAuthenticateRequest(auth_bytes=token), SaslAuthenticateResponse, _AUTHENTICATE_VERSION
    )
    if response.error_code != ErrorCode.NONE:
        raise SaslAuthenticationError(
            f"{ErrorCode(response.error_code).name}: {response.error_message}"
        )
    return bytes(response.auth_bytes), response.session_lifetime_ms


async def authenticate(call: Call, credentials: SaslCredentials) -> int:
    """Authenticate as ``credentials`` say through ``call``; the session's lifetime in
    ms (0: it does not expire), or SaslAuthenticationError."""
    handshake = await call(
        SaslHandshakeRequest(mechanism=credentials.mechanism), SaslHandshakeResponse, 1
    )
    if handshake.error_code != ErrorCode.NONE:
        raise SaslAuthenticationError(
            f"{ErrorCode(handshake.error_code).name}: the broker enables "
            f"{', '.join(handshake.mechanisms or [])}, not {credentials.mechanism}"
        )
    if credentials.mechanism == PLAIN:
        user, password = credentials.username.encode(), credentials.password.encode()
        return (await _token(call, b"\0" + user + b"\0" + password))[1]
    from scramp import ScramClient  # loaded only by SCRAM users

    client = ScramClient([credentials.mechanism], credentials.username, credentials.password)
    server_first, _ = await _token(call, client.get_client_first().encode())
    client.set_server_first(server_first.decode())
    server_final, lifetime_ms = await _token(call, client.get_client_final().encode())
    client.set_server_final(server_final.decode())  # checks the broker knew the password too
    return lifetime_ms


class SaslConnection:
    """A connection that has authenticated, with what it authenticated as and when it
    must do so again."""

    def __init__(
        self, conn: Connection, credentials: SaslCredentials, clock: Clock, lifetime_ms: int
    ) -> None:
        self._conn = conn
        self._clock = clock
        self.credentials = credentials
        self.peer = conn.peer
        self.peer_certificate = conn.peer_certificate
        self._renew_at: float | None = None
        self.renewed(lifetime_ms)

    def renewed(self, lifetime_ms: int) -> None:
        """A (re-)authentication succeeded with this session lifetime."""
        self._renew_at = (
            self._clock.monotonic() + _RENEW_AT * lifetime_ms / 1000 if lifetime_ms > 0 else None
        )

    def reauthentication_due(self) -> bool:
        return self._renew_at is not None and self._clock.monotonic() >= self._renew_at

    async def read_exactly(self, n: int) -> bytes:
        return await self._conn.read_exactly(n)

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self._conn.write(data)

    def writelines(self, buffers: Sequence[bytes | bytearray | memoryview]) -> None:
        self._conn.writelines(buffers)

    async def send_file(self, file: FileHandle, offset: int, count: int) -> None:
        await self._conn.send_file(file, offset, count)

    async def drain(self) -> None:
        await self._conn.drain()

    def close(self) -> None:
        self._conn.close()

    def is_closing(self) -> bool:
        return self._conn.is_closing()


class SaslClientNetwork:
    """A Network whose every connection is authenticated before it is handed out."""

    def __init__(self, network: Network, credentials: SaslCredentials, clock: Clock) -> None:
        self._network = network
        self._credentials = credentials
        self._clock = clock

    async def serve(
        self, host: str, port: int, handler: ConnectionHandler, tls: Tls | None = None
    ) -> Server:
        return await self._network.serve(host, port, handler, tls)

    async def connect(self, host: str, port: int, tls: Tls | None = None) -> SaslConnection:
        conn = await self._network.connect(host, port, tls)

        async def call(request: Any, response_class: Any, version: int) -> Any:
            return await _exchange(conn, request, response_class, version)

        try:
            lifetime_ms = await authenticate(call, self._credentials)
        except BaseException:
            conn.close()
            raise
        return SaslConnection(conn, self._credentials, self._clock, lifetime_ms)
