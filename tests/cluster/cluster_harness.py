"""Several real broker processes on loopback sharing one metastore (SQLite or ZooKeeper)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.metadata import MetadataRequest

from epochlog.client.connection import BrokerConnection
from epochlog.metastore import open_metastore
from epochlog.seams.real import RealClock, SocketNetwork
from support.broker import BrokerProcess, wait_until

# Short timeouts so that failures are noticed within seconds in tests.
FAST_FAILURE_SETTINGS = {
    "zookeeper.session.timeout.ms": "3000",
    "replica.lag.time.max.ms": "3000",
    "replica.fetch.wait.max.ms": "100",
    "auto.create.topics.enable": "false",
    "leader.imbalance.check.interval.seconds": "3600",
}


class Cluster:
    def __init__(self, base: Path, metastore: str, size: int, settings: dict[str, str]) -> None:
        self.metastore = metastore
        self.brokers = [
            BrokerProcess(
                log_dir=base / f"broker{i}" / "logs",
                output_dir=base / f"broker{i}",
                settings={**FAST_FAILURE_SETTINGS, "metastore": metastore, **settings},
                broker_id=i,
            )
            for i in range(size)
        ]

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers)

    def live_bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers if b.is_running())

    def start(self) -> Cluster:
        for broker in self.brokers:
            broker.start()
        wait_until(lambda: self.controller_id() >= 0, 30, "a controller to be elected")
        return self

    def close(self) -> None:
        for broker in self.brokers:
            broker.close()

    def admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.live_bootstrap()})

    def create_topic(
        self, name: str, partitions: int = 1, replication: int = 3, **config: str
    ) -> None:
        topic = NewTopic(
            name,
            partitions,
            replication,
            config={k.replace("_", "."): v for k, v in config.items()},
        )
        admin = self.admin()
        admin.create_topics([topic], operation_timeout=30)[name].result(60)
        wait_until(
            lambda: all(p.leader >= 0 for p in self.metadata(name)["partitions"]),
            30,
            f"leaders for {name}",
        )

    def metadata(self, topic: str, via: int | None = None) -> dict[str, Any]:
        """Metadata v12 of one topic as a chosen (or any live) broker answers it."""
        brokers = (
            [self.brokers[via]] if via is not None else [b for b in self.brokers if b.is_running()]
        )
        return asyncio.run(_metadata(brokers[0].port, topic))

    def leader(self, topic: str, partition: int = 0) -> tuple[int, int]:
        p = self.metadata(topic)["partitions"][partition]
        return p.leader, p.leader_epoch

    def controller_id(self) -> int:
        for broker in self.brokers:
            if broker.is_running():
                try:
                    return asyncio.run(_controller(broker.port))
                except OSError:
                    continue
        return -1

    def controller_epoch(self) -> int:
        async def read() -> int:
            store = await open_metastore(self.metastore, RealClock(), session_timeout_ms=3000)
            try:
                data, _ = await store.get("/controller_epoch")
                return int(data)
            finally:
                await store.close()

        return asyncio.run(read())


async def _metadata(port: int, topic: str) -> dict[str, Any]:
    conn = await BrokerConnection.open(SocketNetwork(), "127.0.0.1", port)
    try:
        response = await conn.send(
            MetadataRequest(
                topics=[MetadataRequest.MetadataRequestTopic(name=topic, topic_id=None)],
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            ),
            12,
        )
    finally:
        await conn.close()
    (entry,) = response.topics
    return {
        "error": entry.error_code,
        "topic_id": entry.topic_id,
        "controller": response.controller_id,
        "partitions": [
            PartitionView(
                p.partition_index,
                p.leader_id,
                p.leader_epoch,
                list(p.isr_nodes),
                list(p.offline_replicas),
            )
            for p in sorted(entry.partitions, key=lambda p: p.partition_index)
        ],
    }


@dataclass(frozen=True)
class PartitionView:
    index: int
    leader: int
    leader_epoch: int
    isr: list[int]
    offline: list[int]


async def _controller(port: int) -> int:
    conn = await BrokerConnection.open(SocketNetwork(), "127.0.0.1", port)
    try:
        response = await conn.send(
            MetadataRequest(
                topics=[],
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            ),
            12,
        )
    finally:
        await conn.close()
    return response.controller_id


@contextmanager
def running_cluster(
    base: Path, metastore: str, size: int = 3, **settings: str
) -> Iterator[Cluster]:
    cluster = Cluster(base, metastore, size, {k: str(v) for k, v in settings.items()})
    try:
        yield cluster.start()
    finally:
        cluster.close()


def eventually(predicate: Callable[[], Any], timeout: float, what: str) -> None:
    wait_until(predicate, timeout, what, interval=0.1)


__all__ = ["Cluster", "eventually", "json", "running_cluster", "time"]
