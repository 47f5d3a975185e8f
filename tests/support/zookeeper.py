"""Real ZooKeeper servers (Debian's ``zookeeper`` package) for tests: one standalone
server, or an ensemble of several on loopback ports (``ZooKeeperEnsemble``).

Other test packages may use them: ``from support.zookeeper import ZooKeeperServer``
(``tests/`` is on sys.path), or the ``zookeeper`` fixture of ``tests/conftest.py``.
A missing java or ZooKeeper makes the test fail, never skip.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from epochlog.tools.local_ports import free_port

CLASSPATH = "/usr/share/java/*:/usr/share/zookeeper/*"
MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")


class ZooKeeperServer:
    """One standalone server on a free loopback port, with its own data folder."""

    def __init__(
        self,
        base: Path,
        tick_ms: int = 500,
        min_session_timeout_ms: int = 1000,
        myid: int = 0,
        quorum: str = "",
    ):
        """``quorum``: the ensemble's ``server.N=...`` lines, with ``myid`` this
        server's N; empty for a standalone server."""
        self.base = base
        self.tick_ms = tick_ms
        self.min_session_timeout_ms = min_session_timeout_ms
        self.myid = myid
        self.quorum = quorum
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = base / "zookeeper.log"

    @property
    def hosts(self) -> str:
        return f"127.0.0.1:{self.port}"

    def uri(self, chroot: str = "") -> str:
        return f"zk://{self.hosts}{chroot}"

    def start(self, timeout_s: float = 60.0) -> ZooKeeperServer:
        self.launch()
        self.wait_serving(timeout_s)
        return self

    def launch(self) -> None:
        """Start the JVM (again on the same client port and data after a kill)."""
        java = shutil.which("java")
        if java is None:
            raise RuntimeError("java not found: apt-get install -y default-jre-headless")
        if not ZOOKEEPER_JAR.exists():
            raise RuntimeError(f"{ZOOKEEPER_JAR} missing: apt-get install -y zookeeper")
        self.port = self.port or free_port()
        data = self.base / "data"
        data.mkdir(parents=True, exist_ok=True)
        if self.quorum:
            (data / "myid").write_text(f"{self.myid}\n")
        cfg = self.base / "zoo.cfg"
        cfg.write_text(
            f"tickTime={self.tick_ms}\n"
            f"dataDir={data}\n"
            f"clientPort={self.port}\n"
            "clientPortAddress=127.0.0.1\n"
            "admin.enableServer=false\n"
            f"minSessionTimeout={self.min_session_timeout_ms}\n"
            # ZooKeeper caps sessions at 20 ticks unless told otherwise; tests choose
            # their own (up to a minute).
            "maxSessionTimeout=60000\n"
            "4lw.commands.whitelist=*\n"
            + (f"initLimit=10\nsyncLimit=5\n{self.quorum}" if self.quorum else "")
        )
        with self.log_path.open("ab") as out:
            self.process = subprocess.Popen(
                [java, "-Xmx256m", "-cp", CLASSPATH, MAIN, str(cfg)],
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.base,
            )

    def wait_serving(self, timeout_s: float = 60.0) -> None:
        """Until the server serves clients (an ensemble's member: once it has joined a
        quorum); fails with the log tail."""
        assert self.process is not None, "launch first"
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"zookeeper exited early:\n{self.tail()}")
            # ruok answers before the server serves; srvr shows a Mode once it does.
            if self.four_letter("ruok") == "imok" and self.mode():
                return
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"zookeeper did not serve in {timeout_s}s:\n{self.tail()}")

    def mode(self) -> str:
        """'leader', 'follower' or 'standalone' as ``srvr`` says; '' while not serving."""
        for line in self.four_letter("srvr").splitlines():
            if line.startswith("Mode:"):
                return line.split(":", 1)[1].strip()
        return ""

    def four_letter(self, word: str) -> str:
        """Send a four-letter command; '' when the server does not answer."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=2) as s:
                s.sendall(word.encode())
                chunks = []
                while chunk := s.recv(4096):
                    chunks.append(chunk)
                return b"".join(chunks).decode(errors="replace")
        except OSError:
            return ""

    def tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def kill(self) -> None:
        """SIGKILL: the server's host is gone."""
        assert self.process is not None and self.process.poll() is None, "not running"
        self.process.send_signal(signal.SIGCONT)
        self.process.kill()
        self.process.wait(10)

    def pause(self) -> None:
        """SIGSTOP: alive to the network, answering nobody."""
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self.process = None


class ZooKeeperEnsemble:
    """``size`` servers on loopback, each with its own client, peer and election port
    and data folder (``myid``), every one listing all (``server.N=127.0.0.1:peer:election``)."""

    def __init__(self, base: Path, size: int = 3, tick_ms: int = 500) -> None:
        quorum = "".join(
            f"server.{n}=127.0.0.1:{free_port()}:{free_port()}\n" for n in range(1, size + 1)
        )
        self.servers = [
            ZooKeeperServer(base / f"zk{n}", tick_ms=tick_ms, myid=n, quorum=quorum)
            for n in range(1, size + 1)
        ]

    @property
    def hosts(self) -> str:
        """The connect string: every server's client address."""
        return ",".join(s.hosts for s in self.servers)

    def uri(self, chroot: str = "") -> str:
        return f"zk://{self.hosts}{chroot}"

    def start(self, timeout_s: float = 120.0) -> ZooKeeperEnsemble:
        """Launch every server, then wait until each serves (a quorum formed)."""
        try:
            for server in self.servers:
                server.launch()
            for server in self.servers:
                server.wait_serving(timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def with_mode(self, mode: str) -> list[ZooKeeperServer]:
        """The running servers that say they are in ``mode`` (leader, follower)."""
        return [
            s
            for s in self.servers
            if s.process is not None and s.process.poll() is None and s.mode() == mode
        ]

    def stop(self) -> None:
        for server in self.servers:
            server.stop()
