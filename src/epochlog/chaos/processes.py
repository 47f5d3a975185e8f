"""The processes a chaos run starts and signals: each broker in its own network
namespace (``ip netns exec`` execs, so the child's pid is the broker's own and SIGKILL,
SIGSTOP and SIGCONT reach it), and Debian's ZooKeeper in the host namespace listening on
the bridge's address, so brokers reach it over their veth and a partition can cut it."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping

from epochlog.chaos.netns import OWNER_MARK, PORT, Network
from epochlog.tools.local_ports import free_port

ZK_CLASSPATH = "/usr/share/java/*:/usr/share/zookeeper/*"
ZK_MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
ZK_JAR = "/usr/share/java/zookeeper.jar"
START_TIMEOUT_S = 60.0


def _wait_port(address: str, port: int, alive: subprocess.Popen, what: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if alive.poll() is not None:
            raise RuntimeError(f"{what} exited with {alive.returncode}")
        with socket.socket() as sock:
            sock.settimeout(1)
            if sock.connect_ex((address, port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"{what} did not listen on {address}:{port} in {START_TIMEOUT_S:.0f} s")


def _signal(process: subprocess.Popen | None, sig: signal.Signals) -> None:
    if process is not None and process.poll() is None:
        os.kill(process.pid, sig)


class ZooKeeper:
    """A standalone ZooKeeper on the bridge's address; its data folder survives a kill,
    as a real server's disk does."""

    def __init__(self, directory: str, address: str) -> None:
        if shutil.which("java") is None or not os.path.exists(ZK_JAR):
            raise RuntimeError("ZooKeeper needs Debian's zookeeper and default-jre-headless")
        self.directory = directory
        self.address = address
        self.port = free_port(address)
        self.process: subprocess.Popen | None = None

    @property
    def uri(self) -> str:
        return f"zk://{self.address}:{self.port}"

    def start(self) -> None:
        data = os.path.join(self.directory, "data")
        os.makedirs(data, exist_ok=True)
        config = os.path.join(self.directory, "zoo.cfg")
        with open(config, "w") as out:
            out.write(
                f"tickTime=500\ndataDir={data}\nclientPort={self.port}\n"
                f"clientPortAddress={self.address}\nadmin.enableServer=false\n"
                "minSessionTimeout=1000\nmaxSessionTimeout=60000\n"
            )
        with open(os.path.join(self.directory, "zookeeper.log"), "ab") as log:
            self.process = subprocess.Popen(
                [
                    "java",
                    f"{OWNER_MARK}{os.getpid()}",
                    "-Xmx256m",
                    "-cp",
                    ZK_CLASSPATH,
                    ZK_MAIN,
                    config,
                ],  # fmt: skip
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        _wait_port(self.address, self.port, self.process, "zookeeper")

    def kill(self) -> None:
        _signal(self.process, signal.SIGKILL)
        if self.process is not None:
            self.process.wait()

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None


class Brokers:
    """Broker processes, broker i in namespace i of ``network``, logs and data under
    ``directory``; every life's output is appended to ``broker-i.log``."""

    def __init__(
        self, network: Network, directory: str, metastore: str, settings: Mapping[str, str]
    ) -> None:
        self.network = network
        self.directory = directory
        self.metastore = metastore
        self.settings = dict(settings)
        self.processes: list[subprocess.Popen | None] = [None] * network.brokers
        self.paused: set[int] = set()

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{self.network.address(i)}:{PORT}" for i in range(len(self.processes)))

    def log_dir(self, i: int) -> str:
        return os.path.join(self.directory, f"broker-{i}")

    def start(self, i: int) -> None:
        """Start broker ``i`` (again) on its data and wait until it listens."""
        command = [
            "ip", "netns", "exec", self.network.namespace(i),
            sys.executable, "-m", "epochlog", "broker",
            "--broker-id", str(i),
            "--listeners", f"PLAINTEXT://{self.network.address(i)}:{PORT}",
            "--log-dirs", self.log_dir(i),
            "--metastore", self.metastore,
        ]  # fmt: skip
        for key, value in self.settings.items():
            command += ["--set", f"{key}={value}"]
        with open(os.path.join(self.directory, f"broker-{i}.log"), "ab") as log:
            process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.processes[i] = process
        _wait_port(self.network.address(i), PORT, process, f"broker {i}")

    def kill(self, i: int) -> None:
        """SIGKILL: no flush, no controlled shutdown, the session left to expire."""
        _signal(self.processes[i], signal.SIGKILL)
        process = self.processes[i]
        if process is not None:
            process.wait()
        self.paused.discard(i)

    def pause(self, i: int) -> None:
        _signal(self.processes[i], signal.SIGSTOP)
        self.paused.add(i)

    def resume(self, i: int) -> None:
        _signal(self.processes[i], signal.SIGCONT)
        self.paused.discard(i)

    def running(self, i: int) -> bool:
        process = self.processes[i]
        return process is not None and process.poll() is None

    def stop_all(self) -> None:
        """SIGCONT then SIGKILL every broker still running (teardown)."""
        for i in range(len(self.processes)):
            self.resume(i)
            self.kill(i)
