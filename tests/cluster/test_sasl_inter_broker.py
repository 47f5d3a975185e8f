"""A 3-broker cluster whose inter-broker listener is SASL_SSL with SCRAM-SHA-512: the
brokers' own user is written into the metastore with `epochlog users --metastore`
before any broker starts, followers fetch from their leaders as that user over TLS,
acks=all holds across the SIGKILL of the leader, transaction markers reach every
partition leader, and SCRAM clients read back every record."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import confluent_kafka as ck
from cluster_harness import Cluster, eventually

# (its TOPIC is the one its produce and consume helpers use)
from test_ssl_inter_broker import TOPIC, consume, established_to, produce

from epochlog.tools.local_ports import free_port
from support.broker import epochlog_command
from support.certs import make_certs, ssl_listener_settings

BROKER_JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    'username="broker" password="broker-secret";'
)


def add_user(store: str, user: str, password: str) -> None:
    command = [*epochlog_command(), "users", "add", "--metastore", store]
    command += ["--mechanism", "SCRAM-SHA-512", "--user", user, "--password", password]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


@contextmanager
def sasl_cluster(tmp_path: Path) -> Iterator[tuple[Cluster, dict[int, int], dict[str, str]]]:
    """The cluster (PLAINTEXT kept for the harness's own requests), each broker's
    SASL_SSL port, and librdkafka settings for a SCRAM user on that listener."""
    certs = make_certs(tmp_path / "certs")
    store = f"sqlite://{tmp_path}/metastore.db"
    add_user(store, "broker", "broker-secret")
    add_user(store, "bob", "bob-secret")
    settings = {
        **ssl_listener_settings(certs, "none"),
        "inter.broker.listener.name": "SASL_SSL",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": BROKER_JAAS,
    }
    cluster = Cluster(tmp_path, store, 3, settings)
    sasl_ports = {}
    for broker in cluster.brokers:
        sasl_ports[broker.broker_id] = free_port()
        broker.settings["listeners"] = (
            f"PLAINTEXT://127.0.0.1:{broker.port},"
            f"SASL_SSL://127.0.0.1:{sasl_ports[broker.broker_id]}"
        )
    conf = {
        "bootstrap.servers": ",".join(f"127.0.0.1:{p}" for p in sasl_ports.values()),
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(certs.ca),
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "bob",
        "sasl.password": "bob-secret",
    }
    try:
        yield cluster.start(), sasl_ports, conf
    finally:
        cluster.close()


def test_a_cluster_replicates_and_elects_over_its_sasl_ssl_inter_broker_listener(
    tmp_path: Path,
) -> None:
    with sasl_cluster(tmp_path) as (cluster, sasl_ports, conf):
        cluster.create_topic(TOPIC, partitions=1, replication=3, min_insync_replicas="2")
        leader, epoch = cluster.leader(TOPIC)
        # Both followers hold a fetch connection to the leader's SASL_SSL listener,
        # authenticated as the brokers' user.
        eventually(lambda: established_to(sasl_ports[leader]) >= 2, 30, "fetchers over SASL")
        broker_logs = "".join(b.output() for b in cluster.brokers)
        assert "authenticated as User:broker (SCRAM-SHA-512)" in broker_logs
        before = [b"before-%d" % i for i in range(1000)]
        produce(conf, before)
        eventually(
            lambda: len(cluster.metadata(TOPIC)["partitions"][0].isr) == 3,
            30,
            "every replica in the ISR",
        )

        cluster.kill(leader)
        eventually(
            lambda: (
                cluster.leader(TOPIC)[0] not in (-1, leader) and cluster.leader(TOPIC)[1] > epoch
            ),
            60,
            "a new leader",
        )
        after = [b"after-%d" % i for i in range(500)]
        produce(conf, after)
        assert consume(conf, len(before) + len(after), **{"group.id": "sasl-readers"}) == (
            before + after
        )


def test_transaction_markers_reach_every_partition_leader_over_sasl(tmp_path: Path) -> None:
    with sasl_cluster(tmp_path) as (cluster, _, conf):
        # One partition led by each broker: the coordinator's markers go to the two
        # others over their SASL_SSL listeners, as the brokers' user.
        cluster.create_topic(TOPIC, assignment=[[0, 1, 2], [1, 2, 0], [2, 0, 1]])
        producer = ck.Producer({**conf, "transactional.id": "sasl-txn"})
        producer.init_transactions(60)
        producer.begin_transaction()
        values = [b"txn-%d" % i for i in range(30)]
        for i, value in enumerate(values):
            producer.produce(TOPIC, value=value, partition=i % 3)
        producer.commit_transaction(60)
        got = consume(
            conf,
            len(values),
            **{"group.id": "sasl-txn-readers", "isolation.level": "read_committed"},
        )
        assert sorted(got) == sorted(values)
