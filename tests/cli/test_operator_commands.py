"""The operator's commands against a real broker process, as typed in a shell."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from support.broker import BrokerProcess


def epochlog(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "epochlog", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_topics_create_alter_describe_list_delete(module_broker: BrokerProcess) -> None:
    server = ["--bootstrap-server", module_broker.bootstrap]
    created = epochlog(
        "topics", "create", "cli-orders", "--partitions", "3", "--replication-factor", "1",
        "--config", "min.insync.replicas=1", *server,
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    assert "created topic cli-orders" in created.stdout
    again = epochlog("topics", "create", "cli-orders", "--partitions", "3", *server)
    assert again.returncode == 1 and "TOPIC_ALREADY_EXISTS" in again.stderr
    altered = epochlog(
        "topics", "alter", "cli-orders", "--config", "cleanup.policy=compact", *server
    )
    assert altered.returncode == 0, altered.stderr
    described = epochlog("topics", "describe", "cli-orders", *server)
    assert described.returncode == 0, described.stderr
    assert "partitions=3" in described.stdout and "cleanup.policy=compact" in described.stdout
    assert described.stdout.count("leader=0 epoch=0") == 3
    assert "cli-orders" in epochlog("topics", "list", *server).stdout.split()
    deleted = epochlog("topics", "delete", "cli-orders", *server)
    assert deleted.returncode == 0, deleted.stderr
    assert "cli-orders" not in epochlog("topics", "list", *server).stdout.split()


def test_status_json_reports_leaders_epochs_and_offsets(module_broker: BrokerProcess) -> None:
    server = ["--bootstrap-server", module_broker.bootstrap]
    assert epochlog("topics", "create", "cli-status", "--partitions", "1", *server).returncode == 0
    status = epochlog("status", "--json", *server)
    assert status.returncode == 0, status.stderr
    report = json.loads(status.stdout)
    (entry,) = [p for p in report["partitions"] if p["topic"] == "cli-status"]
    assert entry["leader"] == 0 and entry["leader_epoch"] == 0 and entry["isr"] == [0]
    assert entry["high_watermark"] == 0
    assert entry["replica_logs"] == {"0": {"log_start": 0, "log_end": 0}}


def test_quarantine_list_says_when_nothing_was_kept(tmp_path: Path) -> None:
    listed = epochlog("quarantine", "list", "--log-dirs", str(tmp_path))
    assert listed.returncode == 0 and listed.stdout.strip() == "nothing quarantined"


def test_bad_invocations_are_refused_with_a_message() -> None:
    missing = epochlog("topics", "create")
    assert missing.returncode == 2 and "needs a topic name" in missing.stderr
    unreachable = epochlog("topics", "list", "--bootstrap-server", "127.0.0.1:1")
    assert unreachable.returncode == 1 and "no broker reachable" in unreachable.stderr
