"""A 3-broker cluster whose inter-broker listener is SASL_SSL with SCRAM-SHA-512: the
brokers' own user is written into the metastore with `epochlog users --metastore`
before any broker starts, followers fetch from their leaders as that user over TLS,
acks=all holds across the SIGKILL of the leader, and SCRAM clients read back every
record."""

from __future__ import annotations

import subprocess
from pathlib import Path

import confluent_kafka as ck
from cluster_harness import Cluster, eventually
from test_ssl_inter_broker import established_to

from support.broker import epochlog_command, free_port
from support.certs import make_certs, ssl_listener_settings

TOPIC = "over-sasl"
BROKER_JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    'username="broker" password="broker-secret";'
)


def add_user(store: str, user: str, password: str) -> None:
    command = [*epochlog_command(), "users", "add", "--metastore", store]
    command += ["--mechanism", "SCRAM-SHA-512", "--user", user, "--password", password]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def test_a_cluster_replicates_and_elects_over_its_sasl_ssl_inter_broker_listener(
    tmp_path: Path,
) -> None:
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
        cluster.start()
        cluster.create_topic(TOPIC, partitions=1, replication=3, min_insync_replicas="2")
        leader, epoch = cluster.leader(TOPIC)
        # Both followers hold a fetch connection to the leader's SASL_SSL listener,
        # authenticated as the brokers' user.
        eventually(lambda: established_to(sasl_ports[leader]) >= 2, 30, "fetchers over SASL")
        broker_logs = "".join(b.output() for b in cluster.brokers)
        assert "authenticated as User:broker (SCRAM-SHA-512)" in broker_logs
        producer = ck.Producer({**conf, "acks": "all", "enable.idempotence": True})
        before = [b"before-%d" % i for i in range(1000)]
        for value in before:
            producer.produce(TOPIC, value=value)
        assert producer.flush(120) == 0
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
        for value in after:
            producer.produce(TOPIC, value=value)
        assert producer.flush(120) == 0
        consumer = ck.Consumer(
            {**conf, "group.id": "sasl-readers", "auto.offset.reset": "earliest"}
        )
        consumer.subscribe([TOPIC])
        got: list[bytes] = []
        for _ in range(120):
            for message in consumer.consume(1000, 1.0):
                assert message.error() is None, message.error()
                got.append(message.value())
            if len(got) >= len(before) + len(after):
                break
        consumer.close()
        assert got == before + after
    finally:
        cluster.close()
