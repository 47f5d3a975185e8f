"""Several real brokers in one process on simulated seams: virtual time, the simulated
network, the memory metastore. The broker, controller, coordinators, replica fetchers
and clients are epochlog's own code, unchanged."""

from __future__ import annotations

import os
import random
from collections.abc import Mapping

from epochlog.broker.broker import Broker
from epochlog.broker.config import BrokerConfig
from epochlog.seams import Disk, Seams
from epochlog.sim.loop import SimClock
from epochlog.sim.network import SimNetwork

PORT = 9092


class SimCluster:
    """``brokers`` brokers named b0, b1, ... on hosts of those names. Each host has its
    own seeded Random; the network's latency comes from ``seed`` too."""

    def __init__(
        self,
        clock: SimClock,
        disk: Disk,
        data_dir: str,
        *,
        seed: int,
        brokers: int = 3,
        latency_ms: tuple[int, int] = (0, 5),
        settings: Mapping[str, object] | None = None,
    ) -> None:
        self.clock = clock
        self.disk = disk
        self.seed = seed
        self.network = SimNetwork(clock, random.Random(seed), latency_ms)
        # The memory metastore is shared by name within the process: one per data dir.
        self.metastore = "memory://sim" + os.path.abspath(data_dir).replace(os.sep, "-")
        self._configs = [
            BrokerConfig.from_mapping(
                {
                    "broker.id": i,
                    "listeners": f"PLAINTEXT://b{i}:{PORT}",
                    "log.dirs": os.path.join(data_dir, f"b{i}"),
                    "metastore": self.metastore,
                    "offsets.topic.replication.factor": min(3, brokers),
                    "transaction.state.log.replication.factor": min(3, brokers),
                    "transaction.state.log.min.isr": min(2, brokers),
                    **(settings or {}),
                }
            )
            for i in range(brokers)
        ]
        self.brokers: list[Broker | None] = [None] * brokers

    @property
    def bootstrap(self) -> str:
        return ",".join(f"b{i}:{PORT}" for i in range(len(self.brokers)))

    def seams(self, host: str, seed: int) -> Seams:
        """The seams of one simulated host."""
        return Seams(self.clock, self.network.host(host), self.disk, random.Random(seed))

    async def start(self) -> None:
        for i in range(len(self.brokers)):
            await self.start_broker(i)

    async def start_broker(self, i: int) -> None:
        broker = Broker(self._configs[i], self.seams(f"b{i}", self.seed * 1000 + i))
        await broker.start()
        self.brokers[i] = broker

    async def stop_broker(self, i: int) -> None:
        broker, self.brokers[i] = self.brokers[i], None
        if broker is not None:
            await broker.stop()

    async def stop(self) -> None:
        for i in range(len(self.brokers)):
            await self.stop_broker(i)
