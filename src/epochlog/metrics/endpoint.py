"""``metrics.listener``: Prometheus text at ``GET /metrics``, served by a minimal HTTP/1.1
server on the broker's own event loop through the Network seam (so a simulated broker
serves it too). Connections are kept alive between scrapes, as Prometheus keeps them."""

from __future__ import annotations

import asyncio
import logging

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from epochlog.seams import Clock, Connection, Network, Server

log = logging.getLogger("epochlog.metrics")

PATH = "/metrics"
# A scrape's request head is a few hundred bytes; anything longer is not a scraper.
MAX_HEAD_BYTES = 8192
IDLE_TIMEOUT_S = 120.0


class BadRequest(Exception):
    """Not an HTTP/1.x request head we can read: the connection is closed."""


class MetricsEndpoint:
    def __init__(self, registry: CollectorRegistry, network: Network, clock: Clock) -> None:
        self._registry = registry
        self._network = network
        self._clock = clock
        self._server: Server | None = None
        self._open: dict[Connection, None] = {}

    async def start(self, host: str, port: int) -> int:
        """Listen; returns the port (``port`` 0 picks a free one)."""
        self._server = await self._network.serve(host, port, self._serve)
        return self._server.port

    def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for conn in list(self._open):
            conn.close()

    async def _serve(self, conn: Connection) -> None:
        self._open[conn] = None
        try:
            while True:
                try:
                    async with self._clock.timeout(IDLE_TIMEOUT_S):
                        head = await _read_head(conn)
                except TimeoutError:
                    return
                keep_alive = self._answer(conn, head)
                await conn.drain()
                if not keep_alive:
                    return
        except BadRequest as exc:
            log.info("metrics: closing connection from %s: %s", conn.peer, exc)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self._open.pop(conn, None)
            conn.close()

    def _answer(self, conn: Connection, head: bytes) -> bool:
        """Write the answer to one request head; True if the connection stays open."""
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            raise BadRequest(f"request line {lines[0][:80]!r}")
        method, target, http_version = parts
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        connection = headers.get("connection", "").lower()
        keep_alive = connection != "close" and (
            http_version == "HTTP/1.1" or connection == "keep-alive"
        )
        content_type = "text/plain"
        if method not in ("GET", "HEAD"):
            status, body = "405 Method Not Allowed", b"GET only\n"
        elif target.split("?", 1)[0] != PATH:
            status, body = "404 Not Found", b"metrics are at /metrics\n"
        else:
            # The format the scraper accepts (Prometheus' text 0.0.4 when it names none),
            # as prometheus_client's own server negotiates it.
            encoder, content_type = choose_encoder(headers.get("accept", ""))
            status, body = "200 OK", encoder(self._registry)
        response = (
            f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\n"
            f"Connection: {'keep-alive' if keep_alive else 'close'}\r\n\r\n"
        ).encode("latin-1")
        conn.writelines([response] if method == "HEAD" else [response, body])
        return keep_alive


async def _read_head(conn: Connection) -> bytes:
    """The bytes of one request head, up to its blank line (a GET has no body)."""
    head = bytearray()
    while not head.endswith(b"\r\n\r\n"):
        if len(head) >= MAX_HEAD_BYTES:
            raise BadRequest(f"request head over {MAX_HEAD_BYTES} bytes")
        head += await conn.read_exactly(1)
    return bytes(head[:-4])
