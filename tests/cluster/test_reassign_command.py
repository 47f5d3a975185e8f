"""`epochlog reassign` as kafka-reassign-partitions.sh is used: --generate a proposal,
--execute a JSON file (printing the assignment to roll back to), --verify until it is
completed, --list, and --cancel refused when nothing is in progress."""

from __future__ import annotations

import json
from pathlib import Path

from cluster_harness import eventually, running_cluster

from support.broker import run_epochlog as epochlog
from support.clients import confluent_consume, confluent_produce
from support.records import make_records

TOPIC = "cli-moving"


def test_reassign_command_generates_executes_verifies_and_lists(tmp_path: Path) -> None:
    with running_cluster(tmp_path, f"sqlite://{tmp_path}/metastore.db") as cluster:
        cluster.create_topic(TOPIC, assignment=[[0, 1]])
        records = make_records(500, "cli")
        confluent_produce(cluster.bootstrap, TOPIC, records, "none")
        server = ["--bootstrap-server", cluster.bootstrap]

        topics = tmp_path / "topics.json"
        topics.write_text(json.dumps({"version": 1, "topics": [{"topic": TOPIC}]}))
        generated = epochlog(
            "reassign", "--generate", "--topics-to-move-json-file", str(topics),
            "--broker-list", "1,2", *server,
        )  # fmt: skip
        assert generated.returncode == 0, generated.stderr
        proposal = json.loads(generated.stdout.split("configuration\n")[1])
        (moved,) = proposal["partitions"]
        assert (moved["topic"], moved["partition"]) == (TOPIC, 0)
        assert sorted(moved["replicas"]) == [1, 2]

        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps(proposal))
        executed = epochlog("reassign", "--execute", "--reassignment-json-file", str(plan), *server)
        assert executed.returncode == 0, executed.stderr
        assert f"Successfully started partition reassignments for {TOPIC}-0" in executed.stdout
        rollback = json.loads(executed.stdout.split("\n\n")[1])
        assert rollback["partitions"][0]["replicas"] == [0, 1]

        def verified() -> bool:
            out = epochlog("reassign", "--verify", "--reassignment-json-file", str(plan), *server)
            return f"Reassignment of partition {TOPIC}-0 is completed." in out.stdout

        eventually(verified, 60, "--verify to report the reassignment completed")
        assert cluster.metadata(TOPIC)["partitions"][0].replicas == moved["replicas"]
        listed = epochlog("reassign", "--list", *server)
        assert listed.returncode == 0 and "No partition reassignments found." in listed.stdout
        cancelled = epochlog("reassign", "--cancel", "--reassignment-json-file", str(plan), *server)
        assert cancelled.returncode == 1 and "NO_REASSIGNMENT_IN_PROGRESS" in cancelled.stderr

        got = confluent_consume(cluster.bootstrap, TOPIC)
        assert [g.key for g in got] == [r.key for r in records]
