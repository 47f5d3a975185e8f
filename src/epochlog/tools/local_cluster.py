"""``epochlog up``: a local cluster of broker processes on loopback."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from epochlog.tools.local_security import LISTENER, MECHANISM, LocalSecurity
from epochlog.tools.terminal import progress

UP_SESSION_TIMEOUT_MS = 6000


@dataclass
class LocalCluster:
    data_dir: str
    brokers: int
    base_port: int
    settings: dict[str, str]
    # Broker N serves /metrics on this port + N; 0: not served.
    metrics_base_port: int = 0
    # `up --secure`: SASL_SSL only (local_security.py); None: PLAINTEXT.
    security: LocalSecurity | None = None

    @property
    def client_settings(self) -> dict[str, str]:
        """What a client needs to reach the cluster."""
        return {
            "bootstrap.servers": self.bootstrap,
            **(self.security.client if self.security else {}),
        }

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{self.base_port + i}" for i in range(self.brokers))

    @property
    def metrics_urls(self) -> list[str]:
        if not self.metrics_base_port:
            return []
        return [f"http://127.0.0.1:{self.metrics_base_port + i}" for i in range(self.brokers)]

    @property
    def metastore(self) -> str:
        return "sqlite://" + os.path.join(self.data_dir, "metastore.db")

    def command(self, broker_id: int) -> list[str]:
        settings = {
            "zookeeper.session.timeout.ms": str(UP_SESSION_TIMEOUT_MS),
            "default.replication.factor": str(min(3, self.brokers)),
            "offsets.topic.replication.factor": str(min(3, self.brokers)),
            **self.settings,
        }
        if self.metrics_base_port:
            settings["metrics.listener"] = self.metrics_urls[broker_id]
        listener = "PLAINTEXT" if self.security is None else LISTENER
        command = [
            sys.executable, "-m", "epochlog", "broker",
            "--broker-id", str(broker_id),
            "--listeners", f"{listener}://127.0.0.1:{self.base_port + broker_id}",
            "--log-dirs", os.path.join(self.data_dir, f"broker-{broker_id}"),
            "--metastore", self.metastore,
        ]  # fmt: skip
        if self.security is not None:  # its passwords are in a file only its owner reads
            command += ["--config", self.security.broker_properties]
        for key, value in settings.items():
            command += ["--set", f"{key}={value}"]
        return command


def start_broker(cluster: LocalCluster, broker_id: int) -> subprocess.Popen:
    """One broker process of the cluster, its output appended to ``broker-N.log``
    (also used by ``epochlog demo`` to restart a broker it killed)."""
    log_path = os.path.join(cluster.data_dir, f"broker-{broker_id}.log")
    with open(log_path, "ab") as log_file:
        return subprocess.Popen(
            cluster.command(broker_id),
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def wait_listening(port: int, process: subprocess.Popen, timeout_s: float) -> None:
    """Until the broker accepts connections; raises when it exits or the bound passes."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"broker on port {port} exited with {process.returncode}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"broker on port {port} did not start within {timeout_s:.0f} s")


def wait_registered(
    cluster: LocalCluster, timeout_s: float, advance: Callable[[], None] = lambda: None
) -> None:
    """Until every broker sees all brokers registered and a controller: only then can a
    topic with a replication factor up to the cluster size be created at once.
    ``advance`` is called as each broker does."""
    from epochlog.client.sync import Admin

    deadline = time.monotonic() + timeout_s
    pending = list(range(cluster.brokers))
    while pending:
        broker_id = pending[0]
        admin = Admin(
            {
                **cluster.client_settings,
                "bootstrap.servers": f"127.0.0.1:{cluster.base_port + broker_id}",
            }
        )
        try:
            info = admin.describe_cluster([])
            if len(info.brokers) >= cluster.brokers and info.controller_id >= 0:
                pending.pop(0)
                advance()
                continue
        except (ConnectionError, OSError, TimeoutError):
            pass
        finally:
            admin.close()
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"broker {broker_id} did not see {cluster.brokers} registered brokers "
                f"and a controller within {timeout_s:.0f} s"
            )
        time.sleep(0.2)


def run_local_cluster(cluster: LocalCluster) -> int:
    """Start the brokers, print the bootstrap servers, stop them all on Ctrl-C/SIGTERM."""
    os.makedirs(cluster.data_dir, exist_ok=True)
    processes: list[subprocess.Popen] = []
    stopping = False

    def stop(*_args: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        for broker_id in range(cluster.brokers):
            processes.append(start_broker(cluster, broker_id))
        # Listening, then seen by every broker with a controller: 2 steps per broker.
        with progress(f"starting {cluster.brokers} brokers", 2 * cluster.brokers) as advance:
            for broker_id, process in enumerate(processes):
                wait_listening(cluster.base_port + broker_id, process, 60)
                advance()
            wait_registered(cluster, 60, advance)
        print(f"bootstrap.servers={cluster.bootstrap}", flush=True)
        if cluster.security is not None:
            print(
                f"SASL_SSL only ({MECHANISM}, CA {cluster.security.ca}); client settings in"
                f" {cluster.security.client_properties}, e.g. epochlog topics list"
                f" --bootstrap-server {cluster.bootstrap}"
                f" --command-config {cluster.security.client_properties}",
                flush=True,
            )
        print(
            f"{cluster.brokers} broker(s), metastore {cluster.metastore}, logs in"
            f" {cluster.data_dir}/broker-N.log; Ctrl-C stops them all",
            flush=True,
        )
        if cluster.metrics_urls:
            print("metrics: " + " ".join(f"{u}/metrics" for u in cluster.metrics_urls), flush=True)
        exited: set[int] = set()
        while not stopping:
            for broker_id, process in enumerate(processes):
                if broker_id not in exited and process.poll() is not None:
                    exited.add(broker_id)
                    print(f"broker {broker_id} exited with {process.returncode}", flush=True)
            time.sleep(0.2)
    finally:
        for process in processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in processes:
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
        print("all brokers stopped", flush=True)
    return 0
