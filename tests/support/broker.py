"""A real epochlog broker process on loopback, for interop, crash and bench runs.

The broker runs as the user would run it (the ``epochlog`` console script of the
running interpreter's environment), so these tests exercise the real CLI, sockets and
files. Its output goes to a file whose tail is shown when a test fails.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from epochlog.tools.local_ports import free_port

START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0

# Every broker started and not yet cleaned up, so a failing test can show their logs.
LIVE_BROKERS: list[BrokerProcess] = []


def epochlog_command() -> list[str]:
    """The console script beside the running interpreter: what a user types."""
    script = Path(sys.executable).parent / "epochlog"
    assert script.exists(), (
        f"{script} is missing: install epochlog into this environment "
        "(bash scripts/test.sh does `pip install -e '.[test]'`)"
    )
    return [str(script)]


def run_epochlog(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``epochlog ARGS...`` as typed in a shell; its exit code and output."""
    return subprocess.run(
        [*epochlog_command(), *args], capture_output=True, text=True, timeout=timeout
    )


def require_binary(name: str, package: str | None = None) -> str:
    """Path of a real tool the tests drive; fails (never skips) when it is absent."""
    path = shutil.which(name)
    assert path, (
        f"`{name}` is not installed: run `apt-get install -y {package or name}` "
        "(bash scripts/test.sh installs it when run as root)"
    )
    return path


def api_versions_probe(host: str, port: int, timeout: float = 2.0) -> bool:
    """Send ApiVersions v0 on a raw socket; True when a well-formed answer comes back.

    A raw request keeps readiness independent of any client library's quirks.
    """
    correlation_id = 0x5EED
    client_id = b"epochlog-tests"
    body = struct.pack(">hhih", 18, 0, correlation_id, len(client_id)) + client_id
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(struct.pack(">i", len(body)) + body)
            head = _recv_exact(s, 4)
            (size,) = struct.unpack(">i", head)
            if size < 6 or size > 1 << 20:
                return False
            payload = _recv_exact(s, size)
    except OSError:
        return False
    got_id, error_code = struct.unpack(">ih", payload[:6])
    return got_id == correlation_id and error_code == 0


def _recv_exact(s: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed mid-response")
        buf += chunk
    return bytes(buf)


class BrokerProcess:
    """One broker: start, wait until it answers, stop cleanly, kill, pause, restart.

    Restarts reuse the same port and log directory, as an operator restarting a host
    would, so clients and on-disk state carry over.
    """

    def __init__(
        self,
        log_dir: Path,
        output_dir: Path,
        settings: Mapping[str, object] | None = None,
        broker_id: int = 0,
        port: int | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.port = port if port is not None else free_port()
        self.log_dir = Path(log_dir)
        self.output_dir = Path(output_dir)
        self.settings = {k: str(v) for k, v in (settings or {}).items()}
        self.proc: subprocess.Popen[bytes] | None = None
        # Environment variables of this broker's process on top of the test's.
        self.extra_env: dict[str, str] = {}
        self.starts = 0
        self.log_path = self.output_dir / f"broker-{broker_id}.log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None, "broker is not running"
        return self.proc.pid

    def command(self) -> list[str]:
        cmd = epochlog_command() + [
            "broker",
            "--broker-id",
            str(self.broker_id),
            "--listeners",
            f"PLAINTEXT://127.0.0.1:{self.port}",
            "--log-dirs",
            str(self.log_dir),
        ]
        for key, value in self.settings.items():
            cmd += ["--set", f"{key}={value}"]
        return cmd

    def start(self, timeout: float = START_TIMEOUT_S) -> BrokerProcess:
        """Launch and block until ApiVersions is answered; fails with the log tail."""
        assert self.proc is None or self.proc.poll() is not None, "already running"
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.output_dir.mkdir(parents=True, exist_ok=True)
        self.starts += 1
        self.log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with open(self.log_path, "ab") as out:
            out.write(f"\n===== start #{self.starts}: {' '.join(self.command())}\n".encode())
            out.flush()
            env = dict(os.environ, PYTHONUNBUFFERED="1", **self.extra_env)
            self.proc = subprocess.Popen(
                self.command(),
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                stdin=subprocess.DEVNULL,
            )
        if self not in LIVE_BROKERS:
            LIVE_BROKERS.append(self)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"broker exited with {self.proc.returncode} before answering\n" + self.tail()
                )
            if api_versions_probe("127.0.0.1", self.port, timeout=1.0):
                return self
            time.sleep(0.1)
        self.kill()
        raise AssertionError(f"broker did not answer ApiVersions in {timeout}s\n" + self.tail())

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """SIGTERM and require a clean exit 0: clean shutdown is part of the contract."""
        proc = self._running()
        proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise AssertionError(
                f"broker did not exit within {timeout}s of SIGTERM\n" + self.tail()
            ) from None
        assert rc == 0, f"broker exited with {rc} after SIGTERM\n" + self.tail()

    def kill(self) -> None:
        """SIGKILL: a crash, nothing flushed by the broker itself."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGCONT)
        self.proc.kill()
        self.proc.wait(STOP_TIMEOUT_S)

    def pause(self) -> None:
        """SIGSTOP: the process lives but answers nobody (a zombie leader)."""
        self._running().send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self._running().send_signal(signal.SIGCONT)

    def restart(self, timeout: float = START_TIMEOUT_S) -> BrokerProcess:
        """Start again on the same port and log directory (after stop or kill)."""
        assert self.proc is not None and self.proc.poll() is not None, "stop or kill first"
        return self.start(timeout)

    def close(self) -> None:
        """Teardown: clean stop when possible, kill otherwise; never leaves a process."""
        try:
            if self.proc is not None and self.proc.poll() is None:
                self.proc.send_signal(signal.SIGCONT)
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(STOP_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
        finally:
            if self in LIVE_BROKERS:
                LIVE_BROKERS.remove(self)

    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def output(self, since_last_start: bool = False) -> str:
        """The broker's combined stdout/stderr (optionally only since the last start)."""
        if not self.log_path.exists():
            return ""
        data = self.log_path.read_bytes()
        if since_last_start:
            data = data[self.log_offset :]
        return data.decode("utf-8", "replace")

    def tail(self, lines: int = 60) -> str:
        text = self.output().splitlines()[-lines:]
        return f"--- last {len(text)} lines of {self.log_path}:\n" + "\n".join(text)

    def peak_rss_bytes(self) -> int:
        """VmHWM of the running broker: the most resident memory it ever used."""
        return _status_kib(self.pid, "VmHWM") * 1024

    def rss_bytes(self) -> int:
        """VmRSS of the running broker: the resident memory it uses now."""
        return _status_kib(self.pid, "VmRSS") * 1024

    def _running(self) -> subprocess.Popen[bytes]:
        assert self.proc is not None and self.proc.poll() is None, (
            "broker is not running\n" + self.tail()
        )
        return self.proc


def _status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def wait_until(
    predicate: Callable[[], object], timeout: float, what: str, interval: float = 0.05
) -> None:
    """Poll a condition with a bound; the bound guards against hangs, not speed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise AssertionError(f"gave up after {timeout}s waiting for: {what}")
