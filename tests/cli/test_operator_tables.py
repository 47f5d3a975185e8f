"""The operator commands' tables and their --json twins, on a real broker: status,
consumer groups (committed offsets with their leader epochs, lag) and a client
configuration from --command-config (an SSL-only listener, as kafka-*.sh reach one)."""

from __future__ import annotations

import json
from pathlib import Path

from epochlog.client import Consumer, Producer, TopicPartition
from epochlog.client.consumer import OffsetAndEpoch
from epochlog.tools.local_ports import free_port
from support.broker import BrokerProcess
from support.broker import run_epochlog as epochlog
from support.certs import make_certs, ssl_listener_settings


def test_status_prints_one_aligned_row_per_partition(module_broker: BrokerProcess) -> None:
    server = ["--bootstrap-server", module_broker.bootstrap]
    assert epochlog("topics", "create", "tab-status", "--partitions", "2", *server).returncode == 0
    status = epochlog("status", *server)
    assert status.returncode == 0, status.stderr
    lines = status.stdout.splitlines()
    assert lines[0].startswith("cluster ") and "controller=0" in lines[0]
    header = next(line for line in lines if line.lstrip().startswith("TOPIC"))
    rows = [line for line in lines if line.lstrip().startswith("tab-status")]
    assert len(rows) == 2
    # Aligned: every row's HW column starts where the header's does.
    hw_at = header.index(" HW") + 1
    assert all(row[hw_at:].split()[0] == "0" for row in rows)


def test_groups_list_and_describe_show_offsets_with_epochs_and_lag(
    module_broker: BrokerProcess,
) -> None:
    server = ["--bootstrap-server", module_broker.bootstrap]
    assert epochlog("topics", "create", "tab-groups", "--partitions", "1", *server).returncode == 0
    with Producer({"bootstrap.servers": module_broker.bootstrap}) as producer:
        for i in range(10):
            producer.produce("tab-groups", b"%d" % i, partition=0)
        assert producer.flush(30)
    tp = TopicPartition("tab-groups", 0)
    with Consumer(
        {"bootstrap.servers": module_broker.bootstrap, "group.id": "tab-billing"}
    ) as consumer:
        consumer.commit({tp: OffsetAndEpoch(4, 0)})
    listed = epochlog("groups", "list", *server)
    assert listed.returncode == 0, listed.stderr
    assert any(line.split()[:1] == ["tab-billing"] for line in listed.stdout.splitlines())
    described = epochlog("groups", "describe", "tab-billing", *server)
    assert described.returncode == 0, described.stderr
    (row,) = [line.split() for line in described.stdout.splitlines() if "tab-groups" in line]
    assert row[:6] == ["tab-groups", "0", "4", "0", "10", "6"]
    report = json.loads(epochlog("groups", "describe", "tab-billing", "--json", *server).stdout)
    assert report["offsets"] == [
        {
            "topic": "tab-groups",
            "partition": 0,
            "committed_offset": 4,
            "committed_leader_epoch": 0,
            "log_end_offset": 10,
            "lag": 6,
            "member": None,
        }
    ]
    missing = epochlog("groups", "describe", *server)
    assert missing.returncode == 2 and "needs a group" in missing.stderr


def test_command_config_reaches_an_ssl_only_listener(tmp_path: Path) -> None:
    certs = make_certs(tmp_path / "certs")
    broker = BrokerProcess(tmp_path / "logs", tmp_path, ssl_listener_settings(certs))
    ssl_port = free_port()
    broker.settings["listeners"] = f"PLAINTEXT://127.0.0.1:{broker.port},SSL://127.0.0.1:{ssl_port}"
    broker.start()
    try:
        config = tmp_path / "client.properties"
        config.write_text(
            "security.protocol=SSL\n"
            f"ssl.ca.location={certs.ca}\n"
            f"ssl.certificate.location={certs.client_cert}\n"
            f"ssl.key.location={certs.client_key}\n"
        )
        server = ["--bootstrap-server", f"127.0.0.1:{ssl_port}"]
        plain = epochlog("topics", "create", "over-tls", *server)
        assert plain.returncode == 1  # TLS bytes expected: the handshake never happens
        made = epochlog("topics", "create", "over-tls", *server, "--command-config", str(config))
        assert made.returncode == 0, made.stderr
        listed = epochlog("topics", "list", *server, "--command-config", str(config))
        assert "over-tls" in listed.stdout.split()
    finally:
        broker.stop()
        broker.close()


def test_log_dirs_describe_prints_one_aligned_row_per_replica(
    module_broker: BrokerProcess,
) -> None:
    server = ["--bootstrap-server", module_broker.bootstrap]
    assert epochlog("topics", "create", "tab-dirs", "--partitions", "2", *server).returncode == 0
    described = epochlog("log-dirs", "describe", "--topic", "tab-dirs", *server)
    assert described.returncode == 0, described.stderr
    header, *rows = described.stdout.splitlines()
    assert header.split() == ["BROKER", "LOG", "DIR", "PARTITION", "SIZE", "LAG", "FUTURE"]
    assert [row.split()[2] for row in rows] == ["tab-dirs-0", "tab-dirs-1"]
    assert {row.split()[1] for row in rows} == {str(module_broker.log_dir)}
    lag_at = header.index("LAG") + 2  # right-aligned under its header
    assert all(row[lag_at] == "0" and row.endswith(" no") for row in rows)
