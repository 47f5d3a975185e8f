"""A seeded schedule of real faults and the nemesis that does them, one at a time:
each fault is applied, lasts its time and is healed before the next one starts.

kill       SIGKILL a broker, restart it on its data after the fault's time
pause      SIGSTOP a broker, SIGCONT it after the fault's time (long enough, often, for
           its metastore session to expire while it still holds connections)
partition  iptables DROP in the brokers' namespaces: one way (a broker stops hearing
           another), symmetric (two brokers lose each other), or one broker isolated
           from the other brokers and the host (the clients and ZooKeeper)
netem      one broker's veth delays and loses what it sends (``netns.Network.degrade``)
zookeeper  SIGKILL ZooKeeper, restart it on its data (only with the zk metastore)
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from epochlog.chaos.netns import Network
from epochlog.chaos.processes import Brokers, ZooKeeper

FAULT_KINDS = ("kill", "pause", "partition", "netem", "zookeeper")
PARTITION_SHAPES = ("one-way", "symmetric", "isolated")


@dataclass(frozen=True)
class Fault:
    at_s: float  # seconds after the workload started
    kind: str
    target: int  # the broker (ignored by zookeeper)
    other: int  # the second broker of a one-way or symmetric partition
    shape: str  # a partition's shape, else ""
    duration_s: float
    delay_ms: int = 0  # a netem fault's delay

    def __str__(self) -> str:
        what = {
            "one-way": f"broker {self.target} stops hearing broker {self.other}",
            "symmetric": f"brokers {self.target} and {self.other} lose each other",
            "isolated": f"broker {self.target} isolated from brokers and host",
        }.get(self.shape, f"broker {self.target}" if self.kind != "zookeeper" else "")
        if self.delay_ms:
            what += f" ({self.delay_ms} ms delay, 20% loss)"
        return f"{self.at_s:6.1f}s {self.kind:<9} {what} for {self.duration_s:.1f}s"


def draw_schedule(
    seed: int, kinds: tuple[str, ...], brokers: int, duration_s: float
) -> list[Fault]:
    """Faults from 3 s in until ``duration_s``, each 2-10 s long, 1-4 s apart."""
    rng = random.Random(seed)
    faults: list[Fault] = []
    at = 3.0
    while kinds and at < duration_s:
        kind = rng.choice(kinds)
        target = rng.randrange(brokers)
        other = (target + 1 + rng.randrange(brokers - 1)) % brokers
        shape = rng.choice(PARTITION_SHAPES) if kind == "partition" else ""
        length = min(round(rng.uniform(2.0, 10.0), 1), max(1.0, duration_s - at))
        delay = rng.randrange(50, 400) if kind == "netem" else 0
        faults.append(Fault(round(at, 1), kind, target, other, shape, length, delay))
        at += length + rng.uniform(1.0, 4.0)
    return faults


class Nemesis:
    """Does a schedule against the cluster (on its own thread: every step is a blocking
    command); ``log`` receives a line per step, ``stop`` cuts the schedule short."""

    def __init__(
        self,
        network: Network,
        brokers: Brokers,
        zookeeper: ZooKeeper | None,
        log: Callable[[str], None],
    ) -> None:
        self.network = network
        self.brokers = brokers
        self.zookeeper = zookeeper
        self.log = log
        self.stop = threading.Event()

    def run(self, schedule: list[Fault], started: float) -> None:
        for fault in schedule:
            if self.stop.wait(max(0.0, started + fault.at_s - time.monotonic())):
                return
            self.log(f"start {fault}")
            self._apply(fault)
            if self.stop.wait(fault.duration_s):
                return  # the run's teardown removes the fault with everything else
            self.heal()
            self.log(f"healed {fault.kind}")

    def _apply(self, fault: Fault) -> None:
        i, net = fault.target, self.network
        if fault.kind == "kill":
            self.brokers.kill(i)
        elif fault.kind == "pause":
            self.brokers.pause(i)
        elif fault.kind == "netem":
            net.degrade(i, fault.delay_ms, loss_percent=20)
        elif fault.kind == "zookeeper":
            if self.zookeeper is None:
                raise ValueError("the zookeeper fault needs --metastore zk")
            self.zookeeper.kill()
        elif fault.shape == "one-way":
            net.drop(i, net.address(fault.other))
        elif fault.shape == "symmetric":
            net.drop(i, net.address(fault.other))
            net.drop(fault.other, net.address(i))
        else:
            for j in range(net.brokers):
                if j != i:
                    net.drop(i, net.address(j))
                    net.drop(j, net.address(i))
            net.drop(i, net.host_address)

    def heal(self) -> None:
        """Everything back: rules and queues gone, paused brokers resumed, dead brokers
        and ZooKeeper restarted."""
        self.network.heal()
        if self.zookeeper is not None and not self.zookeeper.running():
            self.zookeeper.start()
        for i in range(self.network.brokers):
            if i in self.brokers.paused:
                self.brokers.resume(i)
            if not self.brokers.running(i):
                self.brokers.start(i)
