"""The console's web app (aiohttp): one page of plain JS, JSON endpoints, and a stream of
Server-Sent Events carrying a fresh snapshot about every second, so the page follows the
cluster without reloads. It runs on the loop of the admin client it reads through."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from importlib import resources
from typing import Any

from aiohttp import web

from epochlog.client.admin import AsyncAdmin
from epochlog.client.errors import ClientError
from epochlog.console.actions import Replays
from epochlog.console.history import History
from epochlog.console.snapshot import Snapshotter
from epochlog.protocol.errors import KafkaError
from epochlog.seams import Seams
from epochlog.seams.waiting import Signal

logger = logging.getLogger("epochlog.console")

POLL_INTERVAL_S = 1.0
# A stream sends the current state at least this often, so proxies keep it open.
STREAM_HEARTBEAT_S = 5.0
# A quarantine file handed to the replay action may be this large.
MAX_UPLOAD_BYTES = 256 << 20
STATIC = {
    "console.js": "text/javascript",
    "console.css": "text/css",
}


class Console:
    """The state the pages show: the last snapshot, what was observed over time, and
    whether actions are allowed."""

    def __init__(
        self, admin: AsyncAdmin, seams: Seams, client: Mapping[str, str], allow_actions: bool
    ) -> None:
        self.seams = seams
        self.allow_actions = allow_actions
        self.snapshotter = Snapshotter(admin, seams.clock)
        self.history = History()
        self.replays = Replays(seams, client)
        self.snapshot: dict[str, Any] | None = None
        self.error: str | None = None
        self.updated = Signal()

    async def poll_once(self) -> None:
        """Take a snapshot, add it to the history, wake every open stream."""
        try:
            self.snapshot = await self.snapshotter.take()
            self.history.observe(self.snapshot)
            self.error = None
        except (KafkaError, ClientError, OSError, TimeoutError) as exc:
            self.error = str(exc) or type(exc).__name__
            logger.warning("snapshot failed: %s", self.error)
        self.updated.fire()

    async def poll_forever(self) -> None:
        while True:
            await self.poll_once()
            await self.seams.clock.sleep(POLL_INTERVAL_S)

    def state(self) -> dict[str, Any]:
        """Everything a page renders, as one JSON document."""
        return {
            "allow_actions": self.allow_actions,
            "error": self.error,
            "snapshot": self.snapshot,
            "timeline": self.history.timeline(),
            "truncations": self.history.truncations(),
        }


CONSOLE_KEY = web.AppKey("console", Console)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def _read_only(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Without ``--allow-actions`` nothing but reading gets through."""
    if request.method not in ("GET", "HEAD") and not request.app[CONSOLE_KEY].allow_actions:
        return web.json_response(
            {"error": "read-only console: start it with --allow-actions"}, status=403
        )
    return await handler(request)


def _asset(name: str) -> bytes:
    return resources.files("epochlog.console").joinpath("static", name).read_bytes()


async def _index(request: web.Request) -> web.Response:
    return web.Response(body=_asset("index.html"), content_type="text/html", charset="utf-8")


async def _static(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    if name not in STATIC:
        raise web.HTTPNotFound()
    return web.Response(body=_asset(name), content_type=STATIC[name], charset="utf-8")


async def _state(request: web.Request) -> web.Response:
    return web.json_response(request.app[CONSOLE_KEY].state())


async def _events(request: web.Request) -> web.StreamResponse:
    """Server-Sent Events: the whole state after every poll."""
    console = request.app[CONSOLE_KEY]
    stream = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
    )
    await stream.prepare(request)
    try:
        while True:
            await stream.write(f"data: {json.dumps(console.state())}\n\n".encode())
            await console.updated.wait(console.seams.clock, STREAM_HEARTBEAT_S)
    except ConnectionResetError:  # the page went away
        return stream


async def _propose_replay(request: web.Request) -> web.Response:
    """Step one: the uploaded quarantine file and its target, answered with what it holds
    and a token; nothing is written yet."""
    form = await request.post()
    upload = form.get("file")
    if not isinstance(upload, web.FileField):
        return web.json_response({"error": "a quarantine .log file is needed"}, status=400)
    try:
        partition = int(str(form.get("partition", "0")))
        topic = str(form.get("topic", "")).strip()
        if not topic:
            raise ValueError("a target topic is needed")
        summary = request.app[CONSOLE_KEY].replays.propose(upload.file.read(), topic, partition)
    except (ValueError, KafkaError) as exc:
        return web.json_response({"error": str(exc)}, status=400)
    return web.json_response(summary)


async def _confirm_replay(request: web.Request) -> web.Response:
    """Step two: replay what the token's proposal described."""
    try:
        result = await request.app[CONSOLE_KEY].replays.confirm(request.match_info["token"])
    except KeyError:
        return web.json_response({"error": "unknown or expired replay token"}, status=404)
    except (KafkaError, OSError, RuntimeError) as exc:
        return web.json_response({"error": str(exc)}, status=502)
    return web.json_response({"result": result})


def build_app(console: Console) -> web.Application:
    app = web.Application(middlewares=[_read_only], client_max_size=MAX_UPLOAD_BYTES)
    app[CONSOLE_KEY] = console
    app.router.add_get("/", _index)
    app.router.add_get("/static/{name}", _static)
    app.router.add_get("/api/state", _state)
    app.router.add_get("/api/events", _events)
    app.router.add_post("/api/replay", _propose_replay)
    app.router.add_post("/api/replay/{token}/confirm", _confirm_replay)
    return app


async def serve(
    client: Mapping[str, str],
    host: str,
    port: int,
    allow_actions: bool,
    seams: Seams,
    stop: asyncio.Event,
) -> None:
    """Serve the console until ``stop`` is set (or raise what stopped its poller);
    prints the URL it listens on (port 0 picks a free one). ``client``: the admin
    client's settings (``bootstrap.servers``, security)."""
    admin = AsyncAdmin(client, seams)
    console = Console(admin, seams, client, allow_actions)
    runner = web.AppRunner(build_app(console), shutdown_timeout=1.0)
    await runner.setup()
    poller = asyncio.ensure_future(console.poll_forever())
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
        bound_host, bound_port = runner.addresses[0][:2]
        mode = "actions allowed" if allow_actions else "read-only"
        print(f"epochlog console on http://{bound_host}:{bound_port}/ ({mode})", flush=True)
        stopped = asyncio.ensure_future(stop.wait())
        await asyncio.wait({poller, stopped}, return_when=asyncio.FIRST_COMPLETED)
        stopped.cancel()
        if poller.done():  # a poller that died would leave every page stale: say so
            poller.result()
    finally:
        poller.cancel()
        await asyncio.gather(poller, return_exceptions=True)
        await runner.cleanup()
        await admin.close()
