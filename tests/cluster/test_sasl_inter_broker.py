"""A 3-broker cluster whose inter-broker listener is SASL_SSL with SCRAM-SHA-512: the
brokers' own user is written into the metastore with `epochlog users --metastore`
before any broker starts, followers fetch from their leaders as that user over TLS,
acks=all holds across the SIGKILL of the leader, a paused leader is fenced and
truncates, transaction markers reach every partition leader, SCRAM clients read back
every record, and with ACLs on SCRAM users are authorized by them while the brokers
replicate as a super user."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import confluent_kafka as ck
from cluster_harness import Cluster, eventually
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

# (its TOPIC is the one its produce and consume helpers use)
from test_acls_cluster import acls_answered
from test_ssl_inter_broker import TOPIC, consume, established_to, produce
from test_zombie_leader import zombie_is_fenced_and_truncates

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
def sasl_cluster(
    tmp_path: Path, **extra: str
) -> Iterator[tuple[Cluster, dict[int, int], dict[str, str]]]:
    """The cluster (PLAINTEXT kept for the harness's own requests), each broker's
    SASL_SSL port, and librdkafka settings for the SCRAM user bob on that listener
    (admin, with password admin-secret, is a user too)."""
    certs = make_certs(tmp_path / "certs")
    store = f"sqlite://{tmp_path}/metastore.db"
    for user in ("broker", "bob", "admin"):
        add_user(store, user, f"{user}-secret")
    settings = {
        **extra,
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
    with cluster:
        yield cluster, sasl_ports, conf


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


def test_a_paused_leader_is_fenced_and_truncates_over_a_sasl_ssl_inter_broker_listener(
    tmp_path: Path,
) -> None:
    with sasl_cluster(tmp_path) as (cluster, _, _):
        zombie_is_fenced_and_truncates(cluster)


ACLS_ON = {
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "super.users": "User:broker;User:admin",
    "allow.everyone.if.no.acl.found": "false",
    "auto.create.topics.enable": "false",
}


def allow(operation: AclOperation, resource: ResourceType, name: str) -> AclBinding:
    return AclBinding(
        resource,
        name,
        ResourcePatternType.LITERAL,
        "User:bob",
        "*",
        operation,
        AclPermissionType.ALLOW,
    )


# Until the client's metadata and the leader both know the new topic.
RETRIABLE = (
    ck.KafkaError._UNKNOWN_PARTITION,
    ck.KafkaError.UNKNOWN_TOPIC_OR_PART,
    ck.KafkaError.NOT_LEADER_FOR_PARTITION,
)


def watermarks(conf: dict[str, str]) -> tuple[int, int]:
    """The partition's (log start, high watermark), once its leader serves it. A new
    client each try: librdkafka caches a topic a broker did not know yet (one that has
    not caught up with the creation) as missing for the client's life."""
    found: list[tuple[int, int]] = []
    refusals: list[ck.KafkaError] = []

    def answered() -> bool:
        consumer = ck.Consumer({**conf, "group.id": "watermarks"})
        try:
            found.append(consumer.get_watermark_offsets(ck.TopicPartition(TOPIC, 0), 10))
        except ck.KafkaException as exc:
            assert exc.args[0].code() in RETRIABLE, exc
            refusals.append(exc.args[0])
        finally:
            consumer.close()
        return bool(found)

    try:
        eventually(answered, 60, f"{TOPIC}'s leader to answer ListOffsets")
    except AssertionError as exc:
        exc.add_note(f"refused with: {sorted({str(e) for e in refusals})}")
        raise
    return found[-1]


def test_scram_users_are_held_to_acls_while_the_brokers_replicate_as_a_super_user(
    tmp_path: Path,
) -> None:
    with sasl_cluster(tmp_path, **ACLS_ON) as (_, sasl_ports, bob):
        admin_conf = {**bob, "sasl.username": "admin", "sasl.password": "admin-secret"}
        admin = AdminClient(admin_conf)
        topic = NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "2"})
        admin.create_topics([topic], operation_timeout=30)[TOPIC].result(60)

        # bob has no ACL yet: every write is refused and nothing is appended.
        producer = ck.Producer({**bob, "acks": "all", "message.timeout.ms": 10000})
        refused: list[ck.KafkaError | None] = []
        for i in range(5):
            producer.produce(TOPIC, b"refused-%d" % i, on_delivery=lambda e, _m: refused.append(e))
        producer.flush(60)
        assert [e and e.code() for e in refused] == [ck.KafkaError.TOPIC_AUTHORIZATION_FAILED] * 5
        assert watermarks(admin_conf) == (0, 0)

        bindings = [
            allow(AclOperation.WRITE, ResourceType.TOPIC, TOPIC),
            allow(AclOperation.READ, ResourceType.TOPIC, TOPIC),
            allow(AclOperation.READ, ResourceType.GROUP, "bob-readers"),
        ]
        for future in admin.create_acls(bindings).values():
            future.result(60)
        for port in sasl_ports.values():
            eventually(
                lambda port=port: acls_answered(admin_conf, port, "User:bob") == len(bindings),
                30,
                f"the broker on {port} to follow the ACLs",
            )
        values = [b"allowed-%d" % i for i in range(500)]
        produce(bob, values)
        # The followers fetched it all as User:broker, a super user, over SASL_SSL.
        eventually(
            lambda: len(admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions[0].isrs) == 3,
            60,
            "every replica in the ISR",
        )
        assert consume(bob, len(values), **{"group.id": "bob-readers"}) == values
