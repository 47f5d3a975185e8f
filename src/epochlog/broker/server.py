"""The network front of a broker: frames in, one request at a time per connection,
responses out in order (Kafka mutes a connection while its request is handled), and a
connection over a client quota muted for its throttle time once answered (KIP-219)."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import struct
from typing import Any

from epochlog.broker.handlers import Handler
from epochlog.broker.handlers.api_versions import unsupported_version_answer
from epochlog.broker.idle_connections import HANDLING, IN_FRAME, WAITING, IdleWatch
from epochlog.broker.request_budget import RequestBytesBudget
from epochlog.broker.responses import RawResponse
from epochlog.metrics.requests import RequestMetrics
from epochlog.protocol.apis import (
    ApiKey,
    ApiSpec,
    decode_request_body,
    decode_request_header,
    encode_response,
    encode_response_header,
    frame,
    peek_header,
)
from epochlog.protocol.error_codes import error_codes
from epochlog.protocol.errors import KafkaError
from epochlog.quotas.accounting import QuotaManagers, RequestAccount
from epochlog.seams import Clock, Connection
from epochlog.security.listeners import Listener
from epochlog.security.principal import PrincipalMapper
from epochlog.security.sasl import SaslRefused, SaslServerConfig
from epochlog.security.session import AuthenticationFailed, Session, open_session

log = logging.getLogger("epochlog.server")


class ProtocolViolation(Exception):
    """The peer sent something that is not a request we can answer: close the connection."""


class RequestChannel:
    """Decodes one frame, runs its handler, and sends what it answers; counts each
    answered request (``metrics.requests``) once it is written. With client quotas set,
    each request is charged to its user and client id (``quotas.accounting``) and its
    answer carries the throttle time, which ``handle`` returns."""

    def __init__(
        self,
        handlers: dict[int, Handler],
        context: Any,
        clock: Clock,
        metrics: RequestMetrics,
        quotas: QuotaManagers | None = None,
    ) -> None:
        self._handlers = handlers
        self._context = context
        self._clock = clock
        self.metrics = metrics
        self._quotas = quotas
        # What this channel serves, by API key (ApiVersions' answer).
        self.apis: tuple[ApiSpec, ...] = tuple(handlers[key].api for key in sorted(handlers))

    async def handle(self, frame: bytes, conn: Connection, session: Session) -> int:
        """Serve one frame; the milliseconds its connection must then stay muted."""
        clock = self._clock
        started = clock.monotonic()
        api_key, version, correlation_id = _peek(frame)
        handler = self._handlers.get(api_key)
        if handler is None:
            raise ProtocolViolation(f"unknown API key {api_key}")
        spec = handler.api
        if not spec.min_version <= version <= spec.max_version:
            if api_key == ApiKey.API_VERSIONS:
                conn.writelines(unsupported_version_answer(self.apis, correlation_id))
                return 0
            raise ProtocolViolation(f"{spec.name} v{version} is not supported")
        account: RequestAccount | None = None
        try:
            request = decode_request_header(frame, spec.is_flexible(version))
            if self._quotas is not None:
                account = self._quotas.account(session.principal, request.client_id, api_key)
            decoding = clock.monotonic()
            body = decode_request_body(spec, version, request.body)
        except Exception as exc:  # the library raises many kinds on malformed input
            raise ProtocolViolation(f"malformed {spec.name} v{version}: {exc!r}") from exc
        work = handler.handle(self._context, body, version, request, session)
        throttle_ms = 0
        if account is None:
            response = await work
        else:
            account.loop_seconds = clock.monotonic() - decoding
            if _exempt_from_requests(api_key, body):
                account.exempt_from_requests()
            response = await account.timed(clock, work)
            throttle_ms = account.settle(len(frame))
            if throttle_ms and isinstance(response, RawResponse):
                response.set_throttle(throttle_ms)
            elif throttle_ms and response is not None:
                response.throttle_time_ms = throttle_ms
        answering = clock.monotonic()
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
        finished = clock.monotonic()
        if account is not None:
            account.charge_after(finished - answering)
        self.metrics.answered(
            spec.name, version, (finished - started) * 1000, errors, _kind_of(api_key, body)
        )
        return throttle_ms


def _exempt_from_requests(api_key: int, body: Any) -> bool:
    """Kafka charges no request time for a follower's fetch, nor for an acks=0 produce."""
    if api_key == ApiKey.FETCH:
        return bool(body.replica_id >= 0)
    return api_key == ApiKey.PRODUCE and body.acks == 0


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


class ConnectionLoop:
    """Reads size-prefixed frames from one connection until it closes or misbehaves."""

    def __init__(
        self,
        channel: RequestChannel,
        clock: Clock,
        max_request_bytes: int,
        idle_timeout_s: float,
        stall_timeout_s: float,
        ready: asyncio.Event | None = None,
        queued_max_request_bytes: int = -1,
    ) -> None:
        self._channel = channel
        self._clock = clock
        self._max_request_bytes = max_request_bytes
        self._idle_timeout_s = idle_timeout_s
        self._stall_timeout_s = stall_timeout_s
        self._budget = (
            RequestBytesBudget(queued_max_request_bytes) if queued_max_request_bytes > 0 else None
        )
        if self._budget is not None and self._budget.share < max_request_bytes:
            log.warning(
                "requests above %d bytes (half of queued.max.request.bytes=%d) will be "
                "refused, though socket.request.max.bytes=%d",
                self._budget.share,
                queued_max_request_bytes,
                max_request_bytes,
            )
        # In the order they came (closed in that order at shutdown: replayable).
        self.open_connections: dict[Connection, None] = {}
        # When given, requests wait for it: a broker sets it once it has joined the
        # cluster, so that nobody is answered from an empty metadata cache.
        self._ready = ready

    async def serve(
        self,
        conn: Connection,
        listener: Listener,
        mapper: PrincipalMapper,
        sasl: SaslServerConfig | None = None,
    ) -> None:
        """Serve one connection accepted on ``listener`` (after its TLS handshake); on a
        SASL listener, nothing but the SASL exchange until it has authenticated."""
        self.open_connections[conn] = None
        task = asyncio.current_task()
        assert task is not None
        watch = IdleWatch(self._clock, self._idle_timeout_s, self._stall_timeout_s, conn, task)
        try:
            session = open_session(conn, listener, mapper, sasl)
            if self._ready is not None:
                await self._ready.wait()
            while True:
                watch.since, watch.state = self._clock.monotonic(), WAITING
                size_bytes = await conn.read_exactly(4)
                watch.state = HANDLING
                (size,) = struct.unpack(">i", size_bytes)
                limit, setting = self._max_request_bytes, "socket.request.max.bytes"
                auth = session.authentication
                if auth is not None and auth.max_frame() is not None:
                    limit, setting = auth.max_frame(), "sasl.server.max.receive.size"
                if self._budget is not None and self._budget.share < limit:
                    limit, setting = self._budget.share, "queued.max.request.bytes/2"
                if size < 0 or size > limit:
                    log.warning(
                        "closing connection from %s: request of %d bytes exceeds %s=%d",
                        conn.peer,
                        size,
                        setting,
                        limit,
                    )
                    return
                if self._budget is None:
                    session = await self._serve_one(conn, size, session, watch)
                    continue
                await self._budget.acquire(size)
                try:
                    session = await self._serve_one(conn, size, session, watch)
                finally:
                    self._budget.release(size)
        except asyncio.CancelledError:
            if not watch.expired:
                raise
            task.uncancel()  # closed by its watch, which said why
        except (ProtocolViolation, AuthenticationFailed, SaslRefused) as exc:
            log.warning("closing connection from %s: %s", conn.peer, exc)
        except (asyncio.IncompleteReadError, ConnectionError) as exc:
            log.debug("connection from %s closed: %r", conn.peer, exc)
        except Exception:
            log.exception("closing connection from %s after an internal error", conn.peer)
        finally:
            watch.stop()
            self.open_connections.pop(conn, None)
            conn.close()

    async def _mute(self, throttle_ms: int) -> None:
        """KIP-219: the answer is out; read nothing more from the connection for the
        throttle time (Kafka's muted channel)."""
        if throttle_ms > 0:
            await self._clock.sleep(throttle_ms / 1000)

    async def _serve_one(
        self, conn: Connection, size: int, session: Session, watch: IdleWatch
    ) -> Session:
        """Serve one frame; the session it leaves (a SASL exchange may name the user)."""
        # A frame must keep arriving: one stalled mid-way holds buffered bytes.
        watch.since, watch.state, watch.size = self._clock.monotonic(), IN_FRAME, size
        data = await conn.read_exactly(size)
        watch.state = HANDLING
        auth = session.authentication
        if auth is None:
            throttle_ms = await self._channel.handle(data, conn, session)
            await conn.drain()
            await self._mute(throttle_ms)
            return session
        done = auth.authentications
        throttle_ms = 0
        if auth.raw_tokens:
            # After a v0 SaslHandshake, tokens come as bare frames and are answered so.
            result = auth.authenticate(data, self._clock.time_ms())
            if auth.failed:
                raise AuthenticationFailed(f"SASL authentication failed: {auth.failure}")
            conn.writelines(frame(result.reply))
        else:
            auth.admit(_peek(data)[0], self._clock.time_ms())
            throttle_ms = await self._channel.handle(data, conn, session)
        await conn.drain()
        await self._mute(throttle_ms)
        if auth.failed:
            raise AuthenticationFailed(
                f"SASL authentication failed on listener {session.listener}: {auth.failure}"
            )
        if auth.authentications == done:
            return session
        log.info(
            "%s %s as %s (%s)",
            conn.peer,
            "re-authenticated" if done else "authenticated",
            auth.principal,
            auth.mechanism,
        )
        return dataclasses.replace(session, principal=auth.principal)
