"""`epochlog up --brokers 3`: a working local cluster from one command, each broker
serving /metrics, stopped cleanly by Ctrl-C; with --secure, SASL_SSL only, reached
with the client settings it writes and prints."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from epochlog.tools.local_ports import free_ports
from support.metrics import scrape


def test_up_runs_three_brokers_that_replicate_and_stop_on_ctrl_c(tmp_path: Path) -> None:
    port, metrics_port = free_ports(3), free_ports(3)
    up = subprocess.Popen(
        [sys.executable, "-m", "epochlog", "up", "--brokers", "3", "--port", str(port),
         "--metrics-port", str(metrics_port), "--data-dir", str(tmp_path / "cluster")],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip
    try:
        assert up.stdout is not None
        first = up.stdout.readline()
        # Read line by line: communicate() below would miss what readline buffered.
        told = [up.stdout.readline() for _ in range(2)]
        if not first.startswith("bootstrap.servers="):
            # It gave up starting: all it said, and the end of each broker's log.
            said = first + "".join(told) + up.stdout.read()
            for log in sorted((tmp_path / "cluster").glob("broker-*.log")):
                said += f"\n--- {log.name}:\n" + "".join(log.read_text().splitlines(True)[-30:])
            pytest.fail("epochlog up did not start:\n" + said)
        bootstrap = first.strip().removeprefix("bootstrap.servers=")
        assert bootstrap == f"127.0.0.1:{port},127.0.0.1:{port + 1},127.0.0.1:{port + 2}", first
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("up-demo", 1, 3)])["up-demo"].result(60)
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        for i in range(100):
            producer.produce("up-demo", b"%d" % i)
        assert producer.flush(60) == 0
        messages_in = "kafka_server_brokertopicmetrics_messagesin_total"
        scrapes = [scrape(metrics_port + b) for b in range(3)]
        assert sum(s.total(messages_in, topic="up-demo") for s in scrapes) == 100
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "up-demo"})
        consumer.assign([TopicPartition("up-demo", 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(got) < 100 and time.monotonic() < deadline:
            got += [m.value() for m in consumer.consume(100, 0.5) if not m.error()]
        consumer.close()
        assert got == [b"%d" % i for i in range(100)]
        isr = admin.list_topics("up-demo", timeout=10).topics["up-demo"].partitions[0].isrs
        assert sorted(isr) == [0, 1, 2]
    finally:
        up.send_signal(signal.SIGINT)
        rest, _ = up.communicate(timeout=120)
    assert up.returncode == 0
    assert "all brokers stopped" in rest
    assert told[0].startswith("3 broker(s)"), told
    assert told[1].startswith(f"metrics: http://127.0.0.1:{metrics_port}/metrics"), told
    for broker in range(3):
        log = (tmp_path / "cluster" / f"broker-{broker}.log").read_text()
        assert f"broker {broker} stopped cleanly" in log


def test_up_secure_serves_sasl_ssl_only_with_the_settings_it_prints(tmp_path: Path) -> None:
    port = free_ports(3)
    up = subprocess.Popen(
        [sys.executable, "-m", "epochlog", "up", "--secure", "--brokers", "3", "--port",
         str(port), "--data-dir", str(tmp_path / "cluster")],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip
    try:
        assert up.stdout is not None
        bootstrap = up.stdout.readline().strip().removeprefix("bootstrap.servers=")
        told = up.stdout.readline()
        assert told.startswith("SASL_SSL only (SCRAM-SHA-512"), told
        properties = tmp_path / "cluster" / "client.properties"
        assert f"--command-config {properties}" in told
        assert properties.stat().st_mode & 0o077 == 0  # its password is its owner's only
        conf = dict(line.split("=", 1) for line in properties.read_text().splitlines())
        conf["bootstrap.servers"] = bootstrap
        admin = AdminClient(conf)
        admin.create_topics([NewTopic("secure-up", 1, 3)])["secure-up"].result(60)
        producer = Producer({**conf, "acks": "all"})
        for i in range(50):
            producer.produce("secure-up", b"%d" % i)
        assert producer.flush(60) == 0
        consumer = Consumer({**conf, "group.id": "secure-up"})
        consumer.assign([TopicPartition("secure-up", 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(got) < 50 and time.monotonic() < deadline:
            got += [m.value() for m in consumer.consume(50, 0.5) if not m.error()]
        consumer.close()
        assert got == [b"%d" % i for i in range(50)]
        assert not _reaches(AdminClient({"bootstrap.servers": bootstrap}))
    finally:
        up.send_signal(signal.SIGINT)
        up.communicate(timeout=120)
    assert up.returncode == 0


def _reaches(admin: AdminClient) -> bool:
    """Whether a plaintext client gets any metadata from a SASL_SSL-only port."""
    try:
        admin.list_topics(timeout=3)
    except Exception:  # noqa: BLE001 - librdkafka's timeout is the expected answer
        return False
    return True
