"""The operator's commands against a real broker process, as typed in a shell."""

from __future__ import annotations

import json
from pathlib import Path

from support.broker import BrokerProcess
from support.broker import run_epochlog as epochlog


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
    header, *rows = [line.split() for line in described.stdout.splitlines()[1:] if line.strip()]
    assert header == ["PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "OFFLINE"]
    assert rows == [[str(p), "0", "0", "0", "0", "-"] for p in range(3)]
    as_json = json.loads(epochlog("topics", "describe", "cli-orders", "--json", *server).stdout)
    assert [p["leader_epoch"] for p in as_json[0]["partitions"]] == [0, 0, 0]
    assert as_json[0]["configs"]["cleanup.policy"] == "compact"
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
    half_move = epochlog("log-dirs", "move", "--topic", "t", "--dir", "/data2")
    assert half_move.returncode == 1 and "needs one --topic, one --broker" in half_move.stderr
    unreachable = epochlog("topics", "list", "--bootstrap-server", "127.0.0.1:1")
    assert unreachable.returncode == 1 and "no broker reachable" in unreachable.stderr


def test_quarantine_show_and_replay_re_produce_what_a_truncation_kept(
    tmp_path: Path, module_broker: BrokerProcess
) -> None:
    from confluent_kafka import Consumer, TopicPartition

    from epochlog.protocol.records import build_batch
    from epochlog.seams.real import OsDisk, RealClock
    from epochlog.storage.config import LogConfig
    from epochlog.storage.log import Log

    log_dir = tmp_path / "logs"
    log = Log.open(OsDisk(), RealClock(), str(log_dir / "kept-0"), "kept", 0, LogConfig())
    for i in range(4):
        log.append_as_leader(bytearray(build_batch([(b"k%d" % i, b"v%d" % i, [], 1000 + i)])), 2)
    log.truncate_to(2, reason="test")
    log.close()
    listed = epochlog("quarantine", "list", "--log-dirs", str(log_dir))
    assert "kept-0: offsets 2..3" in listed.stdout, listed.stdout + listed.stderr
    (kept_file,) = log_dir.glob("kept-0/quarantine/*.log")
    shown = [
        json.loads(line)
        for line in epochlog("quarantine", "show", str(kept_file)).stdout.splitlines()
    ]
    assert [(r["offset"], r["key"], r["value"], r["leader_epoch"]) for r in shown] == [
        (2, "k2", "v2", 2),
        (3, "k3", "v3", 2),
    ]
    server = ["--bootstrap-server", module_broker.bootstrap]
    assert epochlog("topics", "create", "replayed", "--partitions", "1", *server).returncode == 0
    replayed = epochlog("quarantine", "replay", str(kept_file), "--topic", "replayed", *server)
    assert replayed.returncode == 0 and "replayed 2 records" in replayed.stdout, replayed.stderr
    consumer = Consumer({"bootstrap.servers": module_broker.bootstrap, "group.id": "cli-replay"})
    consumer.assign([TopicPartition("replayed", 0, 0)])
    got = []
    for _ in range(50):
        got += [
            (m.key(), m.value(), m.timestamp()[1])
            for m in consumer.consume(10, 0.2)
            if not m.error()
        ]
        if len(got) == 2:
            break
    consumer.close()
    assert got == [(b"k2", b"v2", 1002), (b"k3", b"v3", 1003)]
