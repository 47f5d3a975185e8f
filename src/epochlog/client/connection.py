"""One connection to one broker: framed requests out, responses matched back by
correlation id. The consumer, producer, admin, replica fetcher and controller all
talk to brokers through this class. On a SASL connection whose session
has a lifetime it re-authenticates in time (KIP-368). A response carrying a throttle time
(a client quota, KIP-219) holds back the next request to that broker until it is over,
as Kafka's clients do (given a clock; the broker mutes the connection anyway)."""

from __future__ import annotations

import asyncio
import contextlib
import struct
from typing import Any

from epochlog.protocol.apis import MESSAGES, decode_response, frame
from epochlog.protocol.produce_request import EncodedProduce
from epochlog.protocol.throttle import client_throttles
from epochlog.seams import Clock, Connection, Network
from epochlog.security.sasl_client import SaslConnection, authenticate

_SIZE = struct.Struct(">i")
_CORRELATION = struct.Struct(">i")


class BrokerConnection:
    def __init__(
        self, conn: Connection, client_id: str = "epochlog", clock: Clock | None = None
    ) -> None:
        self._conn = conn
        self._client_id = client_id
        self._clock = clock
        # KIP-219: no request goes out before this (the clock's monotonic seconds).
        self.throttled_until = 0.0
        self._next_correlation_id = 0
        # correlation id -> (response class, version, waiter)
        self._pending: dict[int, tuple[Any, int, asyncio.Future[Any]]] = {}
        self._reader = asyncio.get_running_loop().create_task(self._read_loop())
        self._closed: BaseException | None = None
        self._reauthenticating = asyncio.Lock()

    @property
    def closed(self) -> bool:
        """True once the connection failed or was closed; open a new one then."""
        return self._closed is not None

    @classmethod
    async def open(
        cls,
        network: Network,
        host: str,
        port: int,
        client_id: str = "epochlog",
        clock: Clock | None = None,
    ) -> BrokerConnection:
        return cls(await network.connect(host, port), client_id, clock)

    async def send(self, request: Any, version: int, expect_response: bool = True) -> Any:
        """Send a request at ``version`` and wait for its decoded response."""
        conn = self._conn
        if isinstance(conn, SaslConnection) and conn.reauthentication_due():
            await self._reauthenticate(conn)
        return await self._send(request, version, expect_response)

    async def _reauthenticate(self, conn: SaslConnection) -> None:
        """KIP-368: authenticate again before the session ends. Other requests wait
        meanwhile (the broker refuses them mid-exchange); those sent before are answered
        first, since a broker serves a connection's requests in order."""
        async with self._reauthenticating:
            if not conn.reauthentication_due():
                return

            async def call(request: Any, _response_class: Any, version: int) -> Any:
                return await self._send(request, version)

            conn.renewed(await authenticate(call, conn.credentials))

    async def _send(self, request: Any, version: int, expect_response: bool = True) -> Any:
        if self._clock is not None:
            # Another answer may throttle the connection again while this one waits.
            while (wait := self.throttled_until - self._clock.monotonic()) > 0:
                await self._clock.sleep(wait)
        if self._closed is not None:
            raise ConnectionError(f"connection closed: {self._closed}")
        _, response_class = MESSAGES[request.API_KEY]
        correlation_id = self._next_correlation_id
        self._next_correlation_id = (correlation_id + 1) & 0x7FFFFFFF
        request.with_header(correlation_id=correlation_id, client_id=self._client_id)
        if type(request) is EncodedProduce:
            pieces = request.encode_framed(version)
        else:
            pieces = frame(request.encode(version=version, header=True))
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if expect_response:
            self._pending[correlation_id] = (response_class, version, future)
        self._conn.writelines(pieces)
        await self._conn.drain()
        if not expect_response:
            return None
        return await future

    async def _read_loop(self) -> None:
        try:
            while True:
                (size,) = _SIZE.unpack(await self._conn.read_exactly(4))
                data = await self._conn.read_exactly(size)
                (correlation_id,) = _CORRELATION.unpack_from(data, 0)
                entry = self._pending.pop(correlation_id, None)
                if entry is None:
                    raise ConnectionError(f"response to unknown correlation id {correlation_id}")
                response_class, version, future = entry
                if future.done():  # its caller was cancelled (a timeout): drop the answer
                    continue
                try:
                    response = decode_response(response_class, version, data)
                except Exception as exc:
                    future.set_exception(exc)
                else:
                    self._note_throttle(response_class.API_KEY, version, response)
                    future.set_result(response)
        except (asyncio.IncompleteReadError, ConnectionError, OSError) as exc:
            self._fail(exc)
        except asyncio.CancelledError:
            self._fail(ConnectionError("connection closed"))
            raise

    def _note_throttle(self, api_key: int, version: int, response: Any) -> None:
        throttle_ms = getattr(response, "throttle_time_ms", None)
        if throttle_ms and self._clock is not None and client_throttles(api_key, version):
            until = self._clock.monotonic() + throttle_ms / 1000
            self.throttled_until = max(self.throttled_until, until)

    def _fail(self, exc: BaseException) -> None:
        self._closed = exc
        pending, self._pending = self._pending, {}
        for _, _, future in pending.values():
            if not future.done():
                future.set_exception(ConnectionError(f"connection lost: {exc}"))

    async def close(self) -> None:
        self._conn.close()
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader
