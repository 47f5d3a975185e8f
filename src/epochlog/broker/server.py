"""The network front of a broker: frames in, one request at a time per connection,
responses out in order (Kafka mutes a connection while its request is handled)."""

from __future__ import annotations

import asyncio
import logging
import struct
from typing import Any

from epochlog.broker.handlers import Handler
from epochlog.broker.handlers.api_versions import unsupported_version_answer
from epochlog.broker.responses import RawResponse
from epochlog.metrics.requests import RequestMetrics
from epochlog.protocol.apis import (
    ApiKey,
    ApiSpec,
    decode_request_body,
    decode_request_header,
    encode_response,
    encode_response_header,
    peek_header,
)
from epochlog.protocol.error_codes import error_codes
from epochlog.protocol.errors import KafkaError
from epochlog.seams import Clock, Connection
from epochlog.security.listeners import Listener
from epochlog.security.principal import PrincipalMapper
from epochlog.security.session import AuthenticationFailed, Session, open_session

log = logging.getLogger("epochlog.server")


class ProtocolViolation(Exception):
    """The peer sent something that is not a request we can answer: close the connection."""


class RequestChannel:
    """Decodes one frame, runs its handler, and sends what it answers; counts each
    answered request (``metrics.requests``) once it is written."""

    def __init__(
        self, handlers: dict[int, Handler], context: Any, clock: Clock, metrics: RequestMetrics
    ) -> None:
        self._handlers = handlers
        self._context = context
        self._clock = clock
        self.metrics = metrics

    @property
    def apis(self) -> list[ApiSpec]:
        """What this channel serves, by API key (ApiVersions' answer)."""
        return [self._handlers[key].api for key in sorted(self._handlers)]

    async def handle(self, frame: bytes, conn: Connection, session: Session) -> None:
        started = self._clock.monotonic()
        api_key, version, correlation_id = _peek(frame)
        handler = self._handlers.get(api_key)
        if handler is None:
            raise ProtocolViolation(f"unknown API key {api_key}")
        spec = handler.api
        if not spec.min_version <= version <= spec.max_version:
            if api_key == ApiKey.API_VERSIONS:
                conn.writelines(unsupported_version_answer(self.apis, correlation_id))
                return
            raise ProtocolViolation(f"{spec.name} v{version} is not supported")
        try:
            request = decode_request_header(frame, spec.is_flexible(version))
            body = decode_request_body(spec, version, request.body)
        except Exception as exc:  # the library raises many kinds on malformed input
            raise ProtocolViolation(f"malformed {spec.name} v{version}: {exc!r}") from exc
        response = await handler.handle(self._context, body, version, request, session)
        if response is None:
            errors: list[int] = []
        elif isinstance(response, RawResponse):
            flexible = spec.is_flexible(version)
            header = encode_response_header(correlation_id, flexible)
            await _send_raw(conn, header, response)
            errors = response.error_codes
        else:
            conn.writelines(encode_response(spec, version, correlation_id, response))
            errors = list(error_codes(response, version))
        elapsed_ms = (self._clock.monotonic() - started) * 1000
        self.metrics.answered(spec.name, version, elapsed_ms, errors, _kind_of(api_key, body))


def _kind_of(api_key: int, body: Any) -> str | None:
    """Kafka's second name for a Fetch in its request metrics: a consumer's and a
    follower's fetches take very different times."""
    if api_key != ApiKey.FETCH:
        return None
    return "FetchFollower" if body.replica_id >= 0 else "FetchConsumer"


def _peek(frame: bytes) -> tuple[int, int, int]:
    try:
        return peek_header(frame)
    except KafkaError as exc:
        raise ProtocolViolation(str(exc)) from exc


async def _send_raw(conn: Connection, header: bytes, response: RawResponse) -> None:
    pending: list[bytes | bytearray | memoryview] = [
        struct.pack(">i", len(header) + response.size),
        header,
    ]
    for part in response.parts:
        if not isinstance(part, bytes | bytearray | memoryview):
            conn.writelines(pending)
            pending = []
            await conn.send_file(part.file, part.position, part.size)
        else:
            pending.append(part)
    if pending:
        conn.writelines(pending)


class RequestBytesBudget:
    """``queued.max.request.bytes``: how many request bytes all connections together may
    hold (Kafka's memory pool). A connection reserves a frame's declared size before it
    reads the frame and gives it back once the request is answered; while the budget is
    spent, connections wait unread, so slow or hostile senders cannot grow the broker."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self._freed = asyncio.Event()

    async def acquire(self, size: int) -> None:
        while self.used and self.used + size > self.limit:
            self._freed.clear()
            await self._freed.wait()
        self.used += size

    def release(self, size: int) -> None:
        self.used -= size
        self._freed.set()


class ConnectionLoop:
    """Reads size-prefixed frames from one connection until it closes or misbehaves."""

    def __init__(
        self,
        channel: RequestChannel,
        clock: Clock,
        max_request_bytes: int,
        idle_timeout_s: float,
        ready: asyncio.Event | None = None,
        queued_max_request_bytes: int = -1,
    ) -> None:
        self._channel = channel
        self._clock = clock
        self._max_request_bytes = max_request_bytes
        self._idle_timeout_s = idle_timeout_s
        self._budget = (
            RequestBytesBudget(queued_max_request_bytes) if queued_max_request_bytes > 0 else None
        )
        # In the order they came (closed in that order at shutdown: replayable).
        self.open_connections: dict[Connection, None] = {}
        # When given, requests wait for it: a broker sets it once it has joined the
        # cluster, so that nobody is answered from an empty metadata cache.
        self._ready = ready

    async def serve(self, conn: Connection, listener: Listener, mapper: PrincipalMapper) -> None:
        """Serve one connection accepted on ``listener`` (after its TLS handshake)."""
        self.open_connections[conn] = None
        try:
            session = open_session(conn, listener, mapper)
            if self._ready is not None:
                await self._ready.wait()
            while True:
                try:
                    async with self._clock.timeout(self._idle_timeout_s):
                        size_bytes = await conn.read_exactly(4)
                except TimeoutError:
                    log.info("closing idle connection from %s", conn.peer)
                    return
                (size,) = struct.unpack(">i", size_bytes)
                if size < 0 or size > self._max_request_bytes:
                    log.warning(
                        "closing connection from %s: request of %d bytes exceeds"
                        " socket.request.max.bytes=%d",
                        conn.peer,
                        size,
                        self._max_request_bytes,
                    )
                    return
                if self._budget is None:
                    await self._serve_one(conn, size, session)
                    continue
                await self._budget.acquire(size)
                try:
                    await self._serve_one(conn, size, session)
                finally:
                    self._budget.release(size)
        except (ProtocolViolation, AuthenticationFailed) as exc:
            log.warning("closing connection from %s: %s", conn.peer, exc)
        except (asyncio.IncompleteReadError, ConnectionError) as exc:
            log.debug("connection from %s closed: %r", conn.peer, exc)
        except Exception:
            log.exception("closing connection from %s after an internal error", conn.peer)
        finally:
            self.open_connections.pop(conn, None)
            conn.close()

    async def _serve_one(self, conn: Connection, size: int, session: Session) -> None:
        try:
            # A frame must keep arriving: one stalled mid-way holds buffered bytes.
            async with self._clock.timeout(self._idle_timeout_s):
                frame = await conn.read_exactly(size)
        except TimeoutError:
            raise ProtocolViolation(
                f"a {size}-byte request did not arrive within connections.max.idle.ms"
            ) from None
        await self._channel.handle(frame, conn, session)
        await conn.drain()
