"""The chaos run's own network: one namespace per broker, joined by veth pairs to a
bridge in the host namespace, on a private /24 of 10.231.0.0/16 that no interface of the
host uses yet. Only what is created here is ever touched.

Faults are made inside the brokers' namespaces (their iptables and their end of the
veth), so deleting a namespace takes its rules and its queueing with it: teardown is
killing what runs in the namespaces, deleting them, the veths and the bridge. (A
deleted namespace lives on, unnamed, while a socket of it still waits on a peer a
partition cut off, and its veth with it: the host ends are deleted by name, which takes
each pair at once.)

This kernel may lack ``sch_netem`` (it is a module many small kernels leave out): a
degraded link is then made with what every kernel with iptables and tc has, random loss
by iptables' ``statistic`` match and delay by a ``tbf`` queue whose rate is low enough
that packets wait in it. ``Network.degrade_mode`` says which one a run used.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
from dataclasses import dataclass, field

PREFIX = "epl-chaos-"
# Interface names are at most 15 bytes: the bridge is "eplc<pid>", the host end of
# broker i's veth "eplc<pid>h<i>".
BRIDGE_PREFIX = "eplc"
PORT = 9092
# On the command line of what a run starts in the host namespace (ZooKeeper's JVM), so
# that a dead run's leftovers there are found as surely as those in its namespaces.
OWNER_MARK = "-Depochlog.chaos.owner="


def run(*argv: str, namespace: str | None = None, check: bool = True) -> str:
    """One command (in ``namespace`` if given); its output. A failure raises with the
    command's own message, so a missing tool or a refused rule is never silent."""
    if namespace is not None:
        argv = ("ip", "netns", "exec", namespace, *argv)
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {done.stderr.strip() or done.returncode}")
    return done.stdout


def _alive(pid: int) -> bool:
    return os.path.exists(f"/proc/{pid}")


def clean_leftovers() -> list[str]:
    """Remove what an earlier run whose process is gone left behind (a SIGKILLed
    ``epochlog chaos``): its namespaces, with every process still in them, its veths,
    its bridge and its ZooKeeper. Runs still alive are left alone. Returns what was removed."""
    removed = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as source:
                    argv = source.read().decode(errors="replace").split("\0")
            except OSError:
                continue
            owners = [a[len(OWNER_MARK) :] for a in argv if a.startswith(OWNER_MARK)]
            if owners and owners[0].isdigit() and not _alive(int(owners[0])):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(entry), signal.SIGKILL)
                removed.append(f"process {entry} ({argv[0]})")
    for line in run("ip", "netns", "list").splitlines():
        name = line.split()[0] if line.split() else ""
        found = re.fullmatch(rf"{PREFIX}(\d+)-.*", name)
        if found and not _alive(int(found.group(1))):
            _kill_namespace(name)
            removed.append(name)
    for line in run("ip", "-o", "link", "show").splitlines():
        found = re.match(rf"\d+: ({BRIDGE_PREFIX}(\d+)(?:h\d+)?)[:@]", line)
        if found and not _alive(int(found.group(2))):
            run("ip", "link", "del", found.group(1), check=False)
            removed.append(found.group(1))
    return removed


def _kill_namespace(name: str) -> None:
    for pid in run("ip", "netns", "pids", name, check=False).split():
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid), signal.SIGKILL)
    run("ip", "netns", "del", name, check=False)


def _free_subnet(start: int) -> int:
    used = run("ip", "-4", "-o", "addr", "show")
    for step in range(254):
        third = (start + step) % 254 + 1
        if f" 10.231.{third}." not in used:
            return third
    raise RuntimeError("no free 10.231.X.0/24 subnet on this host")


@dataclass
class Network:
    """``brokers`` namespaces on a bridge; broker i is at ``address(i)``, the host
    (the workload, ZooKeeper) at ``host_address``."""

    brokers: int
    owner: int = field(default_factory=os.getpid)
    subnet: int = 0
    degrade_mode: str = ""
    _up: bool = False

    @property
    def bridge(self) -> str:
        return f"{BRIDGE_PREFIX}{self.owner}"

    @property
    def host_address(self) -> str:
        return f"10.231.{self.subnet}.1"

    def address(self, i: int) -> str:
        return f"10.231.{self.subnet}.{10 + i}"

    def veth(self, i: int) -> str:
        """The host end of broker ``i``'s veth (its end is eth0 in its namespace)."""
        return f"{self.bridge}h{i}"

    def namespace(self, i: int) -> str:
        return f"{PREFIX}{self.owner}-b{i}"

    def create(self) -> None:
        """The bridge, the namespaces and their veths, each end up."""
        self.subnet = _free_subnet(self.owner)
        self._up = True  # from here on teardown has something to remove
        run("ip", "link", "add", self.bridge, "type", "bridge")
        run("ip", "addr", "add", f"{self.host_address}/24", "dev", self.bridge)
        run("ip", "link", "set", self.bridge, "up")
        for i in range(self.brokers):
            ns, veth = self.namespace(i), self.veth(i)
            run("ip", "netns", "add", ns)
            run("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
            run("ip", "link", "set", veth, "master", self.bridge, "up")
            run("ip", "-n", ns, "addr", "add", f"{self.address(i)}/24", "dev", "eth0")
            run("ip", "-n", ns, "link", "set", "eth0", "up")
            run("ip", "-n", ns, "link", "set", "lo", "up")
        # Whether this kernel has netem: try it on one veth, then take it away.
        run("tc", "qdisc", "add", "dev", "eth0", "root", "netem", "delay", "1ms",
            namespace=self.namespace(0), check=False)  # fmt: skip
        has_netem = "netem" in run(
            "tc", "qdisc", "show", "dev", "eth0", namespace=self.namespace(0)
        )
        self.degrade_mode = "netem" if has_netem else "tbf+statistic"
        if has_netem:
            run("tc", "qdisc", "del", "dev", "eth0", "root", namespace=self.namespace(0))

    def drop(self, receiver: int, sender: str) -> None:
        """Broker ``receiver`` no longer hears from ``sender`` (an address): one way.
        Its replies to ``sender`` still leave, so a TCP peer sees silence, not a reset."""
        run(
            "iptables",
            "-A",
            "INPUT",
            "-s",
            sender,
            "-j",
            "DROP",
            namespace=self.namespace(receiver),
        )

    def degrade(self, i: int, delay_ms: int, loss_percent: int) -> None:
        """Broker ``i``'s outgoing packets are delayed and some lost."""
        ns = self.namespace(i)
        if self.degrade_mode == "netem":
            run("tc", "qdisc", "add", "dev", "eth0", "root", "netem", "delay", f"{delay_ms}ms",
                "loss", f"{loss_percent}%", namespace=ns)  # fmt: skip
            return
        # 1 Mbit/s drains a 64 KB queue in ~0.5 s: what is queued waits up to delay_ms.
        run("tc", "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", "1mbit",
            "burst", "16kb", "latency", f"{delay_ms}ms", namespace=ns)  # fmt: skip
        run("iptables", "-A", "OUTPUT", "-m", "statistic", "--mode", "random",
            "--probability", f"{loss_percent / 100:.3f}", "-j", "DROP", namespace=ns)  # fmt: skip

    def heal(self) -> None:
        """Every rule and queue of every namespace gone: the network as created."""
        for i in range(self.brokers):
            ns = self.namespace(i)
            run("iptables", "-F", namespace=ns)
            run("tc", "qdisc", "del", "dev", "eth0", "root", namespace=ns, check=False)

    def teardown(self) -> None:
        """Kill what still runs in the namespaces, delete them (their rules and queues
        go with them), the veths and the bridge. Safe to call twice."""
        if not self._up:
            return
        for i in range(self.brokers):
            _kill_namespace(self.namespace(i))
            run("ip", "link", "del", self.veth(i), check=False)
        run("ip", "link", "del", self.bridge, check=False)
        self._up = False
