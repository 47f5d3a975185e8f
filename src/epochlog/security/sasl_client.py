"""The client side of SASL (KIP-152): SaslHandshake v1 then SaslAuthenticate tokens on
a fresh connection, before anything else is sent on it. ``SaslClientNetwork`` does it
for every connection a client opens, so producers, consumers, admin clients and a
broker's replica fetchers and transaction markers all authenticate the same way."""

from __future__ import annotations

import struct
from typing import Any

from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from scramp import ScramClient

from epochlog.protocol.errors import ErrorCode
from epochlog.seams import Connection, ConnectionHandler, Network, Server, Tls
from epochlog.security.sasl import PLAIN
from epochlog.security.sasl_listeners import SaslCredentials

_SIZE = struct.Struct(">i")
_AUTHENTICATE_VERSION = 1


class SaslAuthenticationError(ConnectionError):
    """The broker refused the mechanism or the credentials."""


async def _exchange(conn: Connection, request: Any, response_class: Any, version: int) -> Any:
    request.with_header(correlation_id=0, client_id="epochlog")
    payload = bytes(request.encode(version=version, header=True))
    conn.writelines([_SIZE.pack(len(payload)), payload])
    await conn.drain()
    (size,) = _SIZE.unpack(await conn.read_exactly(4))
    return response_class.decode(await conn.read_exactly(size), version=version, header=True)


async def _token(conn: Connection, token: bytes) -> bytes:
    response = await _exchange(
        conn, SaslAuthenticateRequest(auth_bytes=token), SaslAuthenticateResponse,
        _AUTHENTICATE_VERSION,
    )  # fmt: skip
    if response.error_code != ErrorCode.NONE:
        raise SaslAuthenticationError(
            f"{ErrorCode(response.error_code).name}: {response.error_message}"
        )
    return bytes(response.auth_bytes)


async def authenticate(conn: Connection, credentials: SaslCredentials) -> None:
    """Authenticate ``conn`` as ``credentials`` say, or raise SaslAuthenticationError."""
    handshake = await _exchange(
        conn, SaslHandshakeRequest(mechanism=credentials.mechanism), SaslHandshakeResponse, 1
    )
    if handshake.error_code != ErrorCode.NONE:
        raise SaslAuthenticationError(
            f"{ErrorCode(handshake.error_code).name}: the broker enables "
            f"{', '.join(handshake.mechanisms or [])}, not {credentials.mechanism}"
        )
    if credentials.mechanism == PLAIN:
        user, password = credentials.username.encode(), credentials.password.encode()
        await _token(conn, b"\0" + user + b"\0" + password)
        return
    client = ScramClient([credentials.mechanism], credentials.username, credentials.password)
    server_first = await _token(conn, client.get_client_first().encode())
    client.set_server_first(server_first.decode())
    server_final = await _token(conn, client.get_client_final().encode())
    client.set_server_final(server_final.decode())  # checks the broker knew the password too


class SaslClientNetwork:
    """A Network whose every connection is authenticated before it is handed out."""

    def __init__(self, network: Network, credentials: SaslCredentials) -> None:
        self._network = network
        self._credentials = credentials

    async def serve(
        self, host: str, port: int, handler: ConnectionHandler, tls: Tls | None = None
    ) -> Server:
        return await self._network.serve(host, port, handler, tls)

    async def connect(self, host: str, port: int, tls: Tls | None = None) -> Connection:
        conn = await self._network.connect(host, port, tls)
        try:
            await authenticate(conn, self._credentials)
        except BaseException:
            conn.close()
            raise
        return conn
