"""What the benchmark programs share: a broker process, librdkafka's mock cluster,
iperf3, medians.

The broker launcher is the test harness's (tests/support/broker.py), so the benchmark
runs the broker exactly as the interop and crash tests do.
"""

from __future__ import annotations

import ctypes
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from support.broker import BrokerProcess, free_port  # noqa: E402

__all__ = [
    "BrokerProcess",
    "MockCluster",
    "free_port",
    "iperf3_loopback_bytes_per_s",
    "median",
    "fmt_rate",
]


class MockCluster:
    """librdkafka's mock cluster, made through librdkafka's C API (the copy inside
    confluent-kafka), so that topics get the partition count a benchmark asks for: the
    mock has no CreateTopics, and ``test.mock.num.brokers`` creates topics of 4
    partitions. It serves on loopback until this process ends."""

    def __init__(self, brokers: int = 1) -> None:
        import confluent_kafka

        libs = Path(confluent_kafka.__file__).parent.parent / "confluent_kafka.libs"
        lib = ctypes.CDLL(glob.glob(os.path.join(libs, "librdkafka*.so*"))[0])
        lib.rd_kafka_conf_new.restype = ctypes.c_void_p
        lib.rd_kafka_new.restype = ctypes.c_void_p
        lib.rd_kafka_new.argtypes = [
            ctypes.c_int,
            ctypes.c_void_p,
            ctypes.c_char_p,
            ctypes.c_size_t,
        ]
        lib.rd_kafka_mock_cluster_new.restype = ctypes.c_void_p
        lib.rd_kafka_mock_cluster_new.argtypes = [ctypes.c_void_p, ctypes.c_int]
        lib.rd_kafka_mock_cluster_bootstraps.restype = ctypes.c_char_p
        lib.rd_kafka_mock_cluster_bootstraps.argtypes = [ctypes.c_void_p]
        lib.rd_kafka_mock_topic_create.argtypes = [
            ctypes.c_void_p,
            ctypes.c_char_p,
            ctypes.c_int,
            ctypes.c_int,
        ]
        errors = ctypes.create_string_buffer(512)
        self._lib = lib
        self._client = lib.rd_kafka_new(0, lib.rd_kafka_conf_new(), errors, len(errors))
        if not self._client:
            raise RuntimeError(f"librdkafka: {errors.value.decode()}")
        self._cluster = lib.rd_kafka_mock_cluster_new(self._client, brokers)
        self.bootstrap: str = lib.rd_kafka_mock_cluster_bootstraps(self._cluster).decode()

    def create_topic(self, topic: str, partitions: int, replication: int = 1) -> None:
        code = self._lib.rd_kafka_mock_topic_create(
            self._cluster, topic.encode(), partitions, replication
        )
        if code != 0:
            raise RuntimeError(f"mock cluster refused topic {topic}: error {code}")


def median(values: list[float]) -> float:
    return float(statistics.median(values))


def iperf3_loopback_bytes_per_s(seconds: float = 3.0) -> float:
    """One iperf3 TCP run over 127.0.0.1: the ceiling any loopback protocol can reach."""
    iperf3 = shutil.which("iperf3")
    if iperf3 is None:
        raise SystemExit("iperf3 is not installed: apt-get install -y iperf3")
    port = free_port()
    server = subprocess.Popen(
        [iperf3, "-s", "-1", "-B", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while not _listening(port):
            if time.monotonic() > deadline or server.poll() is not None:
                raise RuntimeError("iperf3 server did not start listening")
            time.sleep(0.05)
        client = subprocess.run(
            [iperf3, "-c", "127.0.0.1", "-p", str(port), "-t", str(seconds), "-J"],
            capture_output=True,
            timeout=seconds + 30,
        )
        report = json.loads(client.stdout or b"{}")
        if client.returncode != 0 or "error" in report:
            raise RuntimeError(f"iperf3 client failed: {client.stdout[-500:]!r}")
        return float(report["end"]["sum_received"]["bits_per_second"]) / 8
    finally:
        server.wait(timeout=30)


def _listening(port: int) -> bool:
    """True once some socket listens on the port (read from /proc, no connection made:
    a probe connection would use up the one session `iperf3 -s -1` serves)."""
    hex_port = f":{port:04X}"
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            if cols[1].endswith(hex_port) and cols[3] == "0A":
                return True
    return False


def fmt_rate(records_per_s: float, bytes_per_s: float) -> str:
    return f"{records_per_s:>12,.0f} rec/s {bytes_per_s / 1e6:>9.1f} MB/s"
