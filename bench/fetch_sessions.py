"""Fetch sessions (KIP-227): what incremental fetches save a consumer of many quiet
partitions, against full fetches in the same run.

Two broker processes, each with one topic of --partitions partitions: one with
``max.incremental.fetch.session.cache.slots=0`` (it creates no session, so every fetch
is full, as clients fall back to), one with the default. In each run, for --seconds
seconds per broker, epochlog's consumer reads every partition while a producer writes
--rate records a second (100 bytes) into --hot partitions. Measured per phase: bytes on
the consumer's wire (request and response, counted at its Network seam) and broker CPU
seconds (utime + stime from /proc/<pid>/stat of the broker process). Figures are
medians of --runs runs, each as a ratio to full fetches; the order of the two phases
alternates between runs.

    python bench/fetch_sessions.py [--runs 3] [--seconds 20] [--partitions 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import BrokerProcess, median  # noqa: E402

from epochlog.client import AsyncConsumer, AsyncProducer, TopicPartition  # noqa: E402
from epochlog.seams import Connection, Tls  # noqa: E402
from epochlog.seams.real import real_seams  # noqa: E402

TOPIC = "quiet"
SIZE = 100


class CountingConnection:
    """A client connection that counts the bytes it sends and receives."""

    def __init__(self, inner: Connection, counts: list[int]) -> None:
        self._inner = inner
        self._counts = counts
        self.peer = inner.peer
        self.peer_certificate = inner.peer_certificate

    async def read_exactly(self, n: int) -> bytes:
        data = await self._inner.read_exactly(n)
        self._counts[1] += len(data)
        return data

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self._counts[0] += len(data)
        self._inner.write(data)

    def writelines(self, buffers: Sequence[bytes | bytearray | memoryview]) -> None:
        self._counts[0] += sum(len(b) for b in buffers)
        self._inner.writelines(buffers)

    async def send_file(self, file: Any, offset: int, count: int) -> None:
        self._counts[0] += count
        await self._inner.send_file(file, offset, count)

    async def drain(self) -> None:
        await self._inner.drain()

    def close(self) -> None:
        self._inner.close()

    def is_closing(self) -> bool:
        return self._inner.is_closing()


class CountingNetwork:
    """The real network, with every client connection's bytes counted."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.counts = [0, 0]  # sent, received

    async def serve(self, *args: Any, **kwargs: Any) -> Any:
        return await self._inner.serve(*args, **kwargs)

    async def connect(self, host: str, port: int, tls: Tls | None = None) -> Connection:
        return CountingConnection(await self._inner.connect(host, port, tls), self.counts)


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclasses.dataclass
class Phase:
    wire_bytes: int
    cpu_s: float
    records: int


async def phase(broker: BrokerProcess, args: argparse.Namespace) -> Phase:
    """One consumer of every partition for --seconds while records trickle in."""
    network = CountingNetwork(real_seams().network)
    seams = dataclasses.replace(real_seams(), network=network)
    consumer = AsyncConsumer(
        {"bootstrap.servers": broker.bootstrap, "auto.offset.reset": "latest"}, seams
    )
    producer = AsyncProducer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0}, real_seams())
    consumer.assign([TopicPartition(TOPIC, p) for p in range(args.partitions)])
    await consumer.poll(1000)  # positions found, the session (if any) opened
    stop = asyncio.Event()

    async def trickle() -> None:
        i = 0
        while not stop.is_set():
            await producer.send(TOPIC, b"x" * SIZE, partition=(i * 7) % args.hot)
            i += 1
            await asyncio.sleep(1 / args.rate)

    writer = asyncio.ensure_future(trickle())
    sent, received = network.counts
    cpu = cpu_seconds(broker.pid)
    records = 0
    end = time.monotonic() + args.seconds
    while time.monotonic() < end:
        records += len(list(await consumer.poll(500)))
    result = Phase(sum(network.counts) - sent - received, cpu_seconds(broker.pid) - cpu, records)
    stop.set()
    await writer
    await producer.close()
    await consumer.close()
    return result


def start_broker(folder: Path, name: str, partitions: int, **settings: str) -> BrokerProcess:
    broker = BrokerProcess(folder / name / "logs", folder / name, settings).start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(TOPIC, partitions, 1)])[TOPIC].result(60)
    return broker


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--hot", type=int, default=3, help="partitions that get records")
    parser.add_argument("--rate", type=float, default=5.0, help="records a second")
    args = parser.parse_args()
    logging.getLogger("epochlog").setLevel(logging.ERROR)  # 1,000 position resets
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        full = start_broker(
            folder, "full", args.partitions, **{"max.incremental.fetch.session.cache.slots": "0"}
        )
        incremental = start_broker(folder, "sessions", args.partitions)
        try:
            rows: list[tuple[Phase, Phase]] = []
            for run in range(args.runs):
                if run % 2 == 0:
                    f = asyncio.run(phase(full, args))
                    s = asyncio.run(phase(incremental, args))
                else:
                    s = asyncio.run(phase(incremental, args))
                    f = asyncio.run(phase(full, args))
                rows.append((f, s))
                print(
                    f"run {run + 1}: full {f.wire_bytes / 1e6:.2f} MB {f.cpu_s:.2f} s CPU "
                    f"{f.records} records | sessions {s.wire_bytes / 1e6:.2f} MB "
                    f"{s.cpu_s:.2f} s CPU {s.records} records",
                    flush=True,
                )
        finally:
            for broker in (full, incremental):
                broker.stop()
                broker.close()
    per_s = args.seconds
    print(
        f"\n{args.partitions} partitions, {args.rate:g} records/s into {args.hot}, "
        f"{args.seconds:g} s a phase, median of {args.runs} runs:"
    )
    print(
        f"  full fetches:  {median([f.wire_bytes for f, _ in rows]) / per_s / 1e3:10.1f} kB/s "
        f"on the wire, {median([f.cpu_s for f, _ in rows]) / per_s:.3f} broker CPU s/s"
    )
    print(
        f"  sessions:      {median([s.wire_bytes for _, s in rows]) / per_s / 1e3:10.1f} kB/s "
        f"on the wire, {median([s.cpu_s for _, s in rows]) / per_s:.3f} broker CPU s/s"
    )
    print(
        f"  ratio to full: bytes {median([s.wire_bytes / f.wire_bytes for f, s in rows]):.3f}, "
        f"broker CPU {median([s.cpu_s / max(f.cpu_s, 1e-9) for f, s in rows]):.3f}"
    )


if __name__ == "__main__":
    main()
