"""A real ZooKeeper server (Debian's ``zookeeper`` package) for tests.

Other test packages may use it: ``from support.zookeeper import ZooKeeperServer``
(``tests/`` is on sys.path), or the ``zookeeper`` fixture of ``tests/metastore/conftest.py``.
A missing java or ZooKeeper makes the test fail, never skip.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

CLASSPATH = "/usr/share/java/*:/usr/share/zookeeper/*"
MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ZooKeeperServer:
    """One standalone server on a free loopback port, with its own data folder."""

    def __init__(self, base: Path, tick_ms: int = 500, min_session_timeout_ms: int = 1000):
        self.base = base
        self.tick_ms = tick_ms
        self.min_session_timeout_ms = min_session_timeout_ms
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = base / "zookeeper.log"

    @property
    def hosts(self) -> str:
        return f"127.0.0.1:{self.port}"

    def uri(self, chroot: str = "") -> str:
        return f"zk://{self.hosts}{chroot}"

    def start(self, timeout_s: float = 60.0) -> ZooKeeperServer:
        java = shutil.which("java")
        if java is None:
            raise RuntimeError("java not found: apt-get install -y default-jre-headless")
        if not ZOOKEEPER_JAR.exists():
            raise RuntimeError(f"{ZOOKEEPER_JAR} missing: apt-get install -y zookeeper")
        self.port = free_port()
        data = self.base / "data"
        data.mkdir(parents=True, exist_ok=True)
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
        )
        with self.log_path.open("wb") as out:
            self.process = subprocess.Popen(
                [java, "-Xmx256m", "-cp", CLASSPATH, MAIN, str(cfg)],
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.base,
            )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"zookeeper exited early:\n{self.tail()}")
            # ruok answers before the server serves; srvr shows a Mode once it does.
            if self.four_letter("ruok") == "imok" and "Mode:" in self.four_letter("srvr"):
                return self
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"zookeeper did not answer ruok in {timeout_s}s:\n{self.tail()}")

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

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self.process = None
