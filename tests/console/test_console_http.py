"""The console's HTTP surface against a real broker: the JSON state, the event stream,
read-only by default (every POST 403), and replay only as a confirmed second step."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from aiohttp.test_utils import TestClient, TestServer

from epochlog.client.admin import AsyncAdmin
from epochlog.console.app import Console, build_app
from epochlog.protocol.records import build_batch
from epochlog.seams.real import real_seams
from epochlog.tools.local_ports import free_port
from support.broker import BrokerProcess

TOPIC = "console-http"


def run_console(
    broker: BrokerProcess,
    allow_actions: bool,
    test: Callable[[TestClient, Console], Awaitable[None]],
) -> None:
    """``test`` against a console app on this loop (one poll taken first)."""

    async def main() -> None:
        seams = real_seams()
        client = {"bootstrap.servers": broker.bootstrap}
        admin = AsyncAdmin(client, seams)
        if TOPIC not in (await admin.describe_cluster()).topics:  # the module's first test
            await admin.create_topic(TOPIC, 1, 1)
        console = Console(admin, seams, client, allow_actions)
        deadline = seams.clock.monotonic() + 30
        while not served(console):
            assert seams.clock.monotonic() < deadline, f"{TOPIC} not served: {console.state()}"
            await console.poll_once()
        client = TestClient(TestServer(build_app(console)))
        await client.start_server()
        try:
            await test(client, console)
        finally:
            await client.close()
            await admin.close()

    asyncio.run(main())


def served(console: Console) -> bool:
    """Whether the last snapshot shows the topic led, with its offsets answered."""
    topics = console.snapshot["topics"] if console.snapshot else []
    partitions = [p for t in topics if t["name"] == TOPIC for p in t["partitions"]]
    return bool(partitions) and isinstance(partitions[0].get("high_watermark"), int)


def quarantine_file(count: int) -> bytes:
    """What a truncation leaves in quarantine: the batch bytes as they were on disk."""
    records = [(b"k%d" % i, b"v%d" % i, [], 1_700_000_000_000 + i) for i in range(count)]
    return build_batch(records, base_offset=7, partition_leader_epoch=3)


def upload(data: bytes, topic: str) -> aiohttp.FormData:
    form = aiohttp.FormData()
    form.add_field("file", data, filename="00000000000000000007.log")
    form.add_field("topic", topic)
    form.add_field("partition", "0")
    return form


def test_state_and_events_serve_the_snapshot(module_broker: BrokerProcess) -> None:
    async def check(client: TestClient, console: Console) -> None:
        response = await client.get("/api/state")
        assert response.status == 200
        state: dict[str, Any] = await response.json()
        assert state["error"] is None and state["allow_actions"] is False
        snapshot = state["snapshot"]
        assert [b["port"] for b in snapshot["brokers"]] == [module_broker.port]
        # The broker runs on the embedded default, named by its settings (DescribeConfigs).
        assert snapshot["metastore"] == f"sqlite://{module_broker.log_dir}/metastore.db"
        (topic,) = [t for t in snapshot["topics"] if t["name"] == TOPIC]
        (p,) = topic["partitions"]
        assert (p["leader"], p["leader_epoch"], p["isr"]) == (0, 0, [0])
        assert (p["high_watermark"], p["log_start"], p["log_end"]) == (0, 0, 0)
        assert state["timeline"][f"{TOPIC}-0"][-1]["kind"] == "leader_epoch"

        index = await client.get("/")
        assert "epochlog console" in await index.text()
        assert (await client.get("/static/console.js")).status == 200
        assert (await client.get("/static/index.html")).status == 404

        async with client.get("/api/events") as stream:
            assert stream.headers["Content-Type"] == "text/event-stream"
            line = await stream.content.readline()
            assert line.startswith(b"data: ")
            assert json.loads(line[6:])["snapshot"]["cluster_id"] == snapshot["cluster_id"]

    run_console(module_broker, False, check)


def test_read_only_console_refuses_every_post(module_broker: BrokerProcess) -> None:
    async def check(client: TestClient, console: Console) -> None:
        response = await client.post("/api/replay", data=upload(quarantine_file(2), TOPIC))
        assert response.status == 403
        assert "--allow-actions" in (await response.json())["error"]
        assert (await client.post("/api/replay/anything/confirm")).status == 403

    run_console(module_broker, False, check)


def test_replay_writes_only_after_confirmation(module_broker: BrokerProcess) -> None:
    async def log_end(console: Console) -> int:
        await console.poll_once()
        assert console.snapshot is not None
        (topic,) = [t for t in console.snapshot["topics"] if t["name"] == TOPIC]
        return topic["partitions"][0]["log_end"]

    async def check(client: TestClient, console: Console) -> None:
        before = await log_end(console)
        bad = await client.post("/api/replay", data=upload(b"not a batch" * 10, TOPIC))
        assert bad.status == 400

        proposed = await client.post("/api/replay", data=upload(quarantine_file(3), TOPIC))
        assert proposed.status == 200
        summary = await proposed.json()
        assert {k: summary[k] for k in ("records", "first_offset", "last_offset", "epochs")} == {
            "records": 3,
            "first_offset": 7,
            "last_offset": 9,
            "epochs": [3],
        }
        # Proposing wrote nothing.
        assert await log_end(console) == before

        assert (await client.post("/api/replay/not-a-token/confirm")).status == 404
        done = await client.post(f"/api/replay/{summary['token']}/confirm")
        assert done.status == 200, await done.text()
        assert (await done.json())["result"] == f"replayed 3 records into {TOPIC}-0"
        assert await log_end(console) == before + 3
        # A token confirms once.
        assert (await client.post(f"/api/replay/{summary['token']}/confirm")).status == 404

    run_console(module_broker, True, check)


def test_an_unreachable_cluster_is_reported_not_hidden() -> None:
    async def main() -> None:
        seams = real_seams()
        client = {"bootstrap.servers": f"127.0.0.1:{free_port()}", "request.timeout.ms": "1000"}
        admin = AsyncAdmin(client, seams)
        console = Console(admin, seams, client, False)
        await console.poll_once()
        server = TestClient(TestServer(build_app(console)))
        await server.start_server()
        try:
            state = await (await server.get("/api/state")).json()
            assert state["snapshot"] is None
            assert "no broker answered Metadata: the bootstrap servers: " in state["error"]
        finally:
            await server.close()
            await admin.close()

    asyncio.run(main())
