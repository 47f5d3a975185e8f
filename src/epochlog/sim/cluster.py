"""Several real brokers in one process on simulated seams: virtual time, the simulated
network and disk, the memory metastore. The broker, controller, coordinators, replica
fetchers and clients are epochlog's own code, unchanged.

Each broker runs as the tasks of its host (``loop.run_on_host``), so a crash ends exactly
that broker's work, as SIGKILL ends a process: its tasks are cancelled, its connections
break, its disk keeps only what was fsynced (``sim/disk.py``) and its metastore session
is left to expire."""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import Mapping

from epochlog.broker.broker import Broker
from epochlog.broker.config import BrokerConfig
from epochlog.metastore.memory import MemoryMetastore, drop_memory_store, memory_store
from epochlog.seams import Seams
from epochlog.sim.disk import DiskView, SimDisk
from epochlog.sim.loop import SimClock, VirtualTimeLoop, run_on_host
from epochlog.sim.network import SimNetwork

PORT = 9092
DATA_DIR = "/sim"
_clusters = itertools.count()


class SimCluster:
    """``brokers`` brokers named b0, b1, ... on hosts of those names. The network's
    latency, the disk's tearing and each host's Random all come from ``seed``."""

    def __init__(
        self,
        clock: SimClock,
        *,
        seed: int,
        brokers: int = 3,
        latency_ms: tuple[int, int] = (0, 5),
        settings: Mapping[str, object] | None = None,
    ) -> None:
        self.clock = clock
        self.seed = seed
        self.network = SimNetwork(clock, random.Random(seed), latency_ms)
        self.disk = SimDisk(random.Random(seed + 1))
        # The memory metastore is shared by name within the process: one per cluster.
        self.metastore = f"memory://sim-{next(_clusters)}"
        memory_store(self.metastore.removeprefix("memory://")).clock = clock
        self._configs = [
            BrokerConfig.from_mapping(
                {
                    "broker.id": i,
                    "listeners": f"PLAINTEXT://b{i}:{PORT}",
                    "log.dirs": self.data_dir(i),
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
        self._disks: list[DiskView | None] = [None] * brokers
        self._lives = [0] * brokers
        # Each broker host's clock, kept across its lives (a restart keeps the machine's).
        self.clocks = [clock.for_host() for _ in range(brokers)]

    @property
    def bootstrap(self) -> str:
        return ",".join(f"b{i}:{PORT}" for i in range(len(self.brokers)))

    def seams(self, host: str, seed: int) -> Seams:
        """The seams of a simulated client host (no disk of its own)."""
        disk = self.disk.view(f"{DATA_DIR}/{host}")
        return Seams(self.clock, self.network.host(host), disk, random.Random(seed))

    async def start(self) -> None:
        for i in range(len(self.brokers)):
            await self.start_broker(i)

    def data_dir(self, i: int) -> str:
        return f"{DATA_DIR}/b{i}"

    async def start_broker(self, i: int) -> None:
        """Start broker ``i`` (again, after a crash or stop) on what its disk kept."""
        host = f"b{i}"
        disk = self.disk.view(self.data_dir(i))
        seed = self.seed * 1000 + i * 100 + self._lives[i]
        self._lives[i] += 1
        seams = Seams(self.clocks[i], self.network.host(host), disk, random.Random(seed))
        broker = Broker(self._configs[i], seams)
        await run_on_host(host, broker.start())
        self.brokers[i], self._disks[i] = broker, disk

    async def stop_broker(self, i: int) -> None:
        broker, self.brokers[i] = self.brokers[i], None
        if broker is not None:
            await run_on_host(f"b{i}", broker.stop())

    def crash_broker(self, i: int, garble: random.Random | None = None) -> int:
        """Broker ``i`` dies at once, as under SIGKILL; returns how many unsynced bytes
        its disk kept (torn writes included). With ``garble``, every file's unsynced
        tail is torn and what is kept of it ends in garbage (``SimDisk.crash``)."""
        broker, disk = self.brokers[i], self._disks[i]
        assert broker is not None and disk is not None
        self.brokers[i] = self._disks[i] = None
        host = f"b{i}"
        kept = self.disk.crash(disk, garble)
        self.network.crash(host)
        if isinstance(broker.store, MemoryMetastore):
            broker.store.disconnect(True)  # no more heartbeats: the session expires
        self._loop().cancel_host(host)
        return kept

    def pause(self, i: int) -> None:
        """Broker ``i`` stops running, as under SIGSTOP (a long GC pause, a stalled VM):
        its timers and tasks wait, bytes sent to it wait in its buffers, its metastore
        session expires; ``resume`` lets it go on where it was, late for everything."""
        self._loop().pause_host(f"b{i}")

    def resume(self, i: int) -> None:
        self._loop().resume_host(f"b{i}")

    @staticmethod
    def _loop() -> VirtualTimeLoop:
        loop = asyncio.get_running_loop()
        assert isinstance(loop, VirtualTimeLoop)
        return loop

    def isolate(self, i: int) -> None:
        """Broker ``i`` loses the network and the metastore (its session then expires,
        and the controller moves its leadership away): a zombie until ``heal``."""
        self.network.isolate(f"b{i}")
        self._metastore_of(i).disconnect(True)

    def split(self, i: int) -> None:
        """Broker ``i`` loses the other brokers and the metastore but not the clients: a
        zombie leader that still takes writes it can never commit."""
        for j in range(len(self.brokers)):
            if j != i:
                self.network.partition(f"b{i}", f"b{j}")
        self._metastore_of(i).disconnect(True)

    def cut_metastore(self, i: int) -> None:
        """Broker ``i`` loses only the metastore: its session expires and the controller
        takes it for dead, yet it still fetches and serves (KAFKA-6880's zombie, why
        KIP-320 keeps offline replicas out of the ISR) until ``heal``."""
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
        drop_memory_store(self.metastore.removeprefix("memory://"))
