"""A 3-broker cluster whose inter-broker listener is SSL with client certificates
required: followers fetch from their leaders over TLS, acks=all holds across the
SIGKILL of the leader, transaction markers reach every partition leader, and clients
on the SSL listener read back every record."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import confluent_kafka as ck
from cluster_harness import Cluster, eventually

from epochlog.tools.local_ports import free_port
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


@contextmanager
def ssl_cluster(tmp_path: Path) -> Iterator[tuple[Cluster, dict[int, int], dict[str, str]]]:
    """The cluster (PLAINTEXT kept for the harness's own requests), each broker's SSL
    port, and librdkafka settings for its SSL listener with a client certificate."""
    certs = make_certs(tmp_path / "certs")
    settings = {**ssl_listener_settings(certs), "inter.broker.listener.name": "SSL"}
    cluster = Cluster(tmp_path, f"sqlite://{tmp_path}/metastore.db", 3, settings)
    ssl_ports = {}
    for broker in cluster.brokers:
        ssl_ports[broker.broker_id] = free_port()
        broker.settings["listeners"] = (
            f"PLAINTEXT://127.0.0.1:{broker.port},SSL://127.0.0.1:{ssl_ports[broker.broker_id]}"
        )
    conf = {
        "bootstrap.servers": ",".join(f"127.0.0.1:{p}" for p in ssl_ports.values()),
        "security.protocol": "SSL",
        "ssl.ca.location": str(certs.ca),
        "ssl.certificate.location": str(certs.client_cert),
        "ssl.key.location": str(certs.client_key),
    }
    with cluster:
        yield cluster, ssl_ports, conf


def consume(conf: dict[str, str], count: int, **extra: str) -> list[bytes]:
    consumer = ck.Consumer({**conf, "auto.offset.reset": "earliest", **extra})
    consumer.subscribe([TOPIC])
    got: list[bytes] = []
    for _ in range(120):
        for message in consumer.consume(1000, 1.0):
            assert message.error() is None, message.error()
            got.append(message.value())
        if len(got) >= count:
            break
    consumer.close()
    return got


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
    with ssl_cluster(tmp_path) as (cluster, ssl_ports, conf):
        cluster.create_topic(TOPIC, partitions=1, replication=3, min_insync_replicas="2")
        leader, epoch = cluster.leader(TOPIC)
        # Both followers hold a fetch connection to the leader's SSL listener.
        eventually(lambda: established_to(ssl_ports[leader]) >= 2, 30, "fetchers over TLS")
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
        assert consume(conf, len(before) + len(after), **{"group.id": "tls-readers"}) == (
            before + after
        )


def test_transaction_markers_reach_every_partition_leader_over_tls(tmp_path: Path) -> None:
    with ssl_cluster(tmp_path) as (cluster, _, conf):
        # One partition led by each broker: whichever coordinates the transaction, its
        # markers go to the two others over their SSL listeners.
        cluster.create_topic(TOPIC, assignment=[[0, 1, 2], [1, 2, 0], [2, 0, 1]])
        producer = ck.Producer({**conf, "transactional.id": "tls-txn"})
        producer.init_transactions(60)
        producer.begin_transaction()
        values = [b"txn-%d" % i for i in range(30)]
        for i, value in enumerate(values):
            producer.produce(TOPIC, value=value, partition=i % 3)
        producer.commit_transaction(60)
        # read_committed reads past the records only once each partition has its marker.
        got = consume(
            conf,
            len(values),
            **{"group.id": "tls-txn-readers", "isolation.level": "read_committed"},
        )
        assert sorted(got) == sorted(values)
