"""Brokers with two log dirs, through kafka-python's admin client (describe_log_dirs,
alter_replica_log_dirs; confluent-kafka has neither) and `epochlog log-dirs`: new
partitions spread over the dirs, a replica moved while a confluent-kafka producer writes
with acks=all keeps every acknowledged record once and lives only in its new dir, also
after a restart; bad input gets Kafka's errors; an unreadable dir is reported offline
while the broker serves from the other."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import kafka.errors as kerrors
from cluster_harness import Cluster, eventually, running_cluster
from continuous_producer import ContinuousProducer, check_log_holds_exactly_the_acknowledged
from kafka import KafkaAdminClient
from kafka.structs import TopicPartitionReplica

from support.broker import run_epochlog
from support.clients import confluent_consume

TOPIC = "moved"
KAFKA_STORAGE_ERROR = 56


def describe(cluster: Cluster, broker: int = 0) -> dict[str, list[dict[str, Any]]]:
    """log dir path -> the partitions kafka-python's describe_log_dirs lists in it."""
    admin = KafkaAdminClient(bootstrap_servers=cluster.live_bootstrap())
    try:
        (answer,) = admin.describe_log_dirs(brokers=[broker])
    finally:
        admin.close()
    assert answer["broker"] == broker
    return {
        d["log_dir"]: [
            {"partition": f"{t['name']}-{p['partition_index']}", **p}
            for t in d["topics"]
            for p in t["partitions"]
        ]
        for d in answer["log_dirs"]
    }


def where(cluster: Cluster, partition: str) -> list[tuple[str, bool]]:
    """(log dir, is future) of each copy of ``partition`` on broker 0."""
    return sorted(
        (path, p["is_future_key"])
        for path, parts in describe(cluster).items()
        for p in parts
        if p["partition"] == partition
    )


def alter(cluster: Cluster, wanted: dict[tuple[str, int, int], str]) -> dict[str, str]:
    admin = KafkaAdminClient(bootstrap_servers=cluster.live_bootstrap())
    try:
        result = admin.alter_replica_log_dirs(
            {TopicPartitionReplica(*tpr): path for tpr, path in wanted.items()}
        )
    finally:
        admin.close()
    return {f"{tpr.topic}-{tpr.partition}@{tpr.broker_id}": e.__name__ for tpr, e in result.items()}


def copies_on_disk(dirs: list[Path], partition: str) -> list[str]:
    return sorted(str(p) for d in dirs for p in d.iterdir() if p.name.startswith(partition))


def test_a_replica_moved_under_acks_all_production_keeps_every_record_once_in_its_new_dir(
    tmp_path: Path,
) -> None:
    with running_cluster(
        tmp_path,
        f"sqlite://{tmp_path}/metastore.db",
        size=1,
        log_dirs=2,
        # The copy goes in chunks of replica.fetch.max.bytes, between the producer's appends.
        **{"file.delete.delay.ms": "1000", "replica.fetch.max.bytes": "4096"},
    ) as cluster:
        dirs = [tmp_path / "broker0" / "logs", tmp_path / "broker0" / "logs-1"]
        cluster.create_topic("spread", partitions=4, replication=1)
        counts = {str(d): len(parts) for d, parts in describe(cluster).items()}
        assert counts == {str(dirs[0]): 2, str(dirs[1]): 2}  # the dir with fewest, each time

        cluster.create_topic(TOPIC, partitions=1, replication=1)
        ((source, _),) = where(cluster, f"{TOPIC}-0")
        target = str(dirs[1]) if source == str(dirs[0]) else str(dirs[0])
        producer = ContinuousProducer(cluster.bootstrap, TOPIC).start()
        eventually(lambda: producer.acked() >= 3000, 60, "acks before the move")
        assert alter(cluster, {(TOPIC, 0, 0): target}) == {f"{TOPIC}-0@0": "NoError"}
        eventually(lambda: where(cluster, f"{TOPIC}-0") == [(target, False)], 60, "the swap")
        moved_at = producer.acked()
        eventually(lambda: producer.acked() >= moved_at + 3000, 60, "acks after the move")
        reports = producer.stop()

        check_log_holds_exactly_the_acknowledged(
            reports, confluent_consume(cluster.bootstrap, TOPIC)
        )
        (described,) = [p for p in describe(cluster)[target] if p["partition"] == f"{TOPIC}-0"]
        assert described["offset_lag"] == 0 and described["partition_size"] > 0
        eventually(
            lambda: copies_on_disk(dirs, f"{TOPIC}-0") == [f"{target}/{TOPIC}-0"],
            30,
            "the old copy removed after file.delete.delay.ms",
        )

        cluster.brokers[0].stop()
        cluster.brokers[0].start()
        assert where(cluster, f"{TOPIC}-0") == [(target, False)]
        check_log_holds_exactly_the_acknowledged(
            reports, confluent_consume(cluster.bootstrap, TOPIC)
        )


def test_bad_moves_get_kafkas_errors_and_the_cli_describes_and_moves(tmp_path: Path) -> None:
    with running_cluster(
        tmp_path, f"sqlite://{tmp_path}/metastore.db", size=2, log_dirs=2
    ) as cluster:
        cluster.create_topic("here", assignment=[[0], [1]])
        logs = str(tmp_path / "broker0" / "logs-1")
        assert alter(
            cluster,
            {
                ("here", 0, 0): "/nowhere",  # not a log dir of broker 0
                ("absent", 0, 0): logs,  # no such topic
                ("here", 7, 0): logs,  # no such partition
                ("here", 1, 0): logs,  # broker 1's replica, not broker 0's
            },
        ) == {
            "here-0@0": kerrors.LogDirNotFoundError.__name__,
            "absent-0@0": kerrors.UnknownTopicOrPartitionError.__name__,
            "here-7@0": kerrors.UnknownTopicOrPartitionError.__name__,
            "here-1@0": kerrors.ReplicaNotAvailableError.__name__,
        }

        bootstrap = ["--bootstrap-server", cluster.bootstrap]
        ((source, _),) = where(cluster, "here-0")
        target = next(d for d in describe(cluster) if d != source)
        moved = run_epochlog(
            "log-dirs", "move", "--topic", "here", "--partition", "0", "--broker", "0",
            "--dir", target, *bootstrap,
        )  # fmt: skip
        assert moved.returncode == 0, moved.stderr
        eventually(lambda: where(cluster, "here-0") == [(target, False)], 60, "the swap")
        described = run_epochlog("log-dirs", "describe", "--topic", "here", "--json", *bootstrap)
        assert described.returncode == 0, described.stderr
        brokers = {b["broker"]: b["logDirs"] for b in json.loads(described.stdout)["brokers"]}
        assert sorted(brokers) == [0, 1]
        on_0 = {d["logDir"]: [p["partition"] for p in d["partitions"]] for d in brokers[0]}
        assert on_0 == {target: ["here-0"], source: []}
        refused = run_epochlog(
            "log-dirs", "move", "--topic", "here", "--broker", "0", "--dir", "/nowhere", *bootstrap
        )
        assert refused.returncode == 1 and "LOG_DIR_NOT_FOUND" in refused.stderr


def test_a_log_dir_unreadable_at_start_is_offline_with_its_partitions_and_back_once_restored(
    tmp_path: Path,
) -> None:
    with running_cluster(
        tmp_path, f"sqlite://{tmp_path}/metastore.db", size=1, log_dirs=2
    ) as cluster:
        dirs = [tmp_path / "broker0" / "logs", tmp_path / "broker0" / "logs-1"]
        cluster.create_topic("served", partitions=2, replication=1)
        for p in (0, 1):
            assert cluster.produce(0, "served", [(b"k", b"before %d" % p)], partition=p)[0] == 0
        (lost,) = [p for p in (0, 1) if where(cluster, f"served-{p}") == [(str(dirs[1]), False)]]
        kept = 1 - lost
        broker = cluster.brokers[0]
        broker.stop()
        dirs[1].rename(tmp_path / "away")
        dirs[1].write_bytes(b"a file where a log dir should be")
        broker.start()

        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
        try:
            (answer,) = admin.describe_log_dirs()
        finally:
            admin.close()
        errors = {d["log_dir"]: d["error_code"] for d in answer["log_dirs"]}
        assert errors == {str(dirs[0]): 0, str(dirs[1]): KAFKA_STORAGE_ERROR}
        assert where(cluster, f"served-{kept}") == [(str(dirs[0]), False)]
        produced = cluster.produce(0, "served", [(b"k", b"offline")], partition=lost)
        assert produced[0] == KAFKA_STORAGE_ERROR
        assert cluster.fetch_error(0, "served", lost, 0, -1) == KAFKA_STORAGE_ERROR
        assert copies_on_disk([dirs[0]], f"served-{lost}") == []  # never re-created empty
        assert cluster.produce(0, "served", [(b"k", b"after")], partition=kept)[0] == 0
        assert alter(
            cluster, {("served", kept, 0): str(dirs[1]), ("served", lost, 0): str(dirs[0])}
        ) == {
            f"served-{kept}@0": kerrors.KafkaStorageError.__name__,  # to the offline dir
            f"served-{lost}@0": kerrors.KafkaStorageError.__name__,  # the offline replica
        }

        broker.stop()
        dirs[1].unlink()
        (tmp_path / "away").rename(dirs[1])
        broker.start()
        eventually(
            lambda: cluster.produce(0, "served", [(b"k", b"back")], partition=lost)[0] == 0,
            30,
            "the restored partition served",
        )
        values = [g.value for g in confluent_consume(cluster.bootstrap, "served", partition=lost)]
        assert values == [b"before %d" % lost, b"back"]


def test_a_move_a_stop_interrupted_resumes_at_the_next_start(tmp_path: Path) -> None:
    with running_cluster(
        tmp_path, f"sqlite://{tmp_path}/metastore.db", size=1, log_dirs=2
    ) as cluster:
        dirs = [tmp_path / "broker0" / "logs", tmp_path / "broker0" / "logs-1"]
        cluster.create_topic(TOPIC, partitions=1, replication=1, segment_bytes="16384")
        producer = ContinuousProducer(cluster.bootstrap, TOPIC, batch_num_messages=20).start()
        eventually(lambda: producer.acked() >= 3000, 60, "acks before the stop")
        reports = producer.stop()
        ((source, _),) = where(cluster, f"{TOPIC}-0")
        target = Path(next(str(d) for d in dirs if str(d) != source))
        cluster.brokers[0].stop()
        # What a stop in the middle of a copy leaves: a future log holding the first
        # segments of the current one, in the target dir.
        future = target / f"{TOPIC}-0.1-future"
        shutil.copytree(Path(source) / f"{TOPIC}-0", future)
        segments = sorted(future.glob("*.log"))
        assert len(segments) > 2
        for path in future.iterdir():
            if path.suffix == ".snapshot" or path.stem >= segments[len(segments) // 2].stem:
                path.unlink()

        cluster.brokers[0].start()
        eventually(lambda: where(cluster, f"{TOPIC}-0") == [(str(target), False)], 60, "the swap")
        check_log_holds_exactly_the_acknowledged(
            reports, confluent_consume(cluster.bootstrap, TOPIC)
        )
        cluster.brokers[0].stop()  # a clean stop removes the replaced copy
        assert copies_on_disk(dirs, f"{TOPIC}-0") == [f"{target}/{TOPIC}-0"]
