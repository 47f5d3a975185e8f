"""A 3-broker cluster whose inter-broker listener is SSL with client certificates
required: followers fetch from their leaders over TLS, acks=all holds across the
SIGKILL of the leader, and clients on the SSL listener read back every record."""

from __future__ import annotations

from pathlib import Path

import confluent_kafka as ck
from cluster_harness import Cluster, eventually

from support.broker import free_port
from support.certs import make_certs, ssl_listener_settings

TOPIC = "over-tls"


def established_to(port: int) -> int:
    """Open TCP connections from this host to ``port`` on loopback (/proc/net/tcp)."""
    count = 0
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        remote, state = fields[2], fields[3]
        if state == "01" and int(remote.split(":")[1], 16) == port:
            count += 1
    return count


def produce(conf: dict[str, str], values: list[bytes]) -> None:
    producer = ck.Producer({**conf, "acks": "all", "enable.idempotence": True})
    errors: list[str] = []
    for value in values:
        producer.produce(
            TOPIC, value=value, on_delivery=lambda err, _m: err and errors.append(str(err))
        )
    assert producer.flush(120) == 0
    assert not errors, errors[:3]


def test_a_cluster_replicates_and_elects_over_its_ssl_inter_broker_listener(
    tmp_path: Path,
) -> None:
    certs = make_certs(tmp_path / "certs")
    settings = {**ssl_listener_settings(certs), "inter.broker.listener.name": "SSL"}
    cluster = Cluster(tmp_path, f"sqlite://{tmp_path}/metastore.db", 3, settings)
    ssl_ports = {}
    for broker in cluster.brokers:
        ssl_ports[broker.broker_id] = free_port()
        broker.settings["listeners"] = (
            f"PLAINTEXT://127.0.0.1:{broker.port},SSL://127.0.0.1:{ssl_ports[broker.broker_id]}"
        )
    try:
        cluster.start()
        cluster.create_topic(TOPIC, partitions=1, replication=3, min_insync_replicas="2")
        leader, epoch = cluster.leader(TOPIC)
        # Both followers hold a fetch connection to the leader's SSL listener.
        eventually(lambda: established_to(ssl_ports[leader]) >= 2, 30, "fetchers over TLS")
        conf = {
            "bootstrap.servers": ",".join(f"127.0.0.1:{p}" for p in ssl_ports.values()),
            "security.protocol": "SSL",
            "ssl.ca.location": str(certs.ca),
            "ssl.certificate.location": str(certs.client_cert),
            "ssl.key.location": str(certs.client_key),
        }
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

        consumer = ck.Consumer({**conf, "group.id": "tls-readers", "auto.offset.reset": "earliest"})
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
