"""Several real brokers in one process on simulated seams: virtual time, the simulated
network, the memory metastore. The broker, controller, coordinators, replica fetchers
and clients are epochlog's own code, unchanged."""

from __future__ import annotations

import os
import random
from collections.abc import Mapping

from epochlog.broker.broker import Broker
from epochlog.broker.config import BrokerConfig
from epochlog.metastore.memory import MemoryMetastore
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

    def isolate(self, i: int) -> None:
        """Broker ``i`` loses the network and the metastore (its session then expires,
        and the controller moves its leadership away): a zombie until ``heal``."""
        self.network.isolate(f"b{i}")
        self._metastore_of(i).disconnect(True)

    def heal(self) -> None:
        self.network.heal()
        for i in range(len(self.brokers)):
            if self.brokers[i] is not None and self._metastore_of(i).disconnected:
                self._metastore_of(i).disconnect(False)

    def _metastore_of(self, i: int) -> MemoryMetastore:
        broker = self.brokers[i]
        assert broker is not None and isinstance(broker.store, MemoryMetastore)
        return broker.store

    async def stop(self) -> None:
        for i in range(len(self.brokers)):
            await self.stop_broker(i)
