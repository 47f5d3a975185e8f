"""A 3-broker cluster with ACLs on and an SSL inter-broker listener: the brokers present
their certificate (CN=broker) to each other and are super users, so followers fetch,
the ISR holds and a leader's SIGKILL elects another; ACLs created through one broker
are followed by all, so a user allowed only what she needs produces with acks=all and
reads everything back through whichever broker leads."""

from __future__ import annotations

import asyncio
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

from epochlog.client.admin import AsyncAdmin
from epochlog.seams.real import real_seams
from epochlog.security.acls import AclBindingFilter
from epochlog.tools.local_ports import free_port
from support.certs import CN_RULES, make_user_certs, ssl_listener_settings

TOPIC = "guarded"
BOUND_S = 120


def _allow(operation: AclOperation, name: str, resource: ResourceType) -> AclBinding:
    return AclBinding(
        resource, name, ResourcePatternType.LITERAL, "User:alice", "*", operation,
        AclPermissionType.ALLOW,
    )  # fmt: skip


def _leader(admin: AdminClient) -> tuple[int, list[int]]:
    partition = admin.list_topics(TOPIC, timeout=30).topics[TOPIC].partitions[0]
    return partition.leader, list(partition.isrs)


def acls_answered(admin_conf: dict[str, str], port: int, principal: str) -> int:
    """How many ACLs of ``principal`` the broker on ``port`` answers DescribeAcls with
    (epochlog's admin asks its bootstrap broker)."""

    async def ask() -> int:
        admin = AsyncAdmin({**admin_conf, "bootstrap.servers": f"127.0.0.1:{port}"}, real_seams())
        try:
            return len(await admin.describe_acls(AclBindingFilter(principal=principal)))
        finally:
            await admin.close()

    return asyncio.run(ask())


def _produce(conf: dict[str, str], values: list[bytes]) -> None:
    producer = ck.Producer({**conf, "acks": "all", "message.timeout.ms": 60000})
    errors: list[str] = []
    for value in values:
        producer.produce(TOPIC, value, on_delivery=lambda e, _m: e and errors.append(str(e)))
    assert producer.flush(BOUND_S) == 0
    assert not errors, errors[:3]


def test_brokers_replicate_and_elect_over_ssl_as_super_users_with_acls_on(
    tmp_path: Path,
) -> None:
    certs = make_user_certs(tmp_path / "certs", "admin", "alice")
    settings = {
        **ssl_listener_settings(certs),
        "inter.broker.listener.name": "SSL",
        "ssl.principal.mapping.rules": CN_RULES,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        # The brokers' own principal (their keystore's subject) and the operator.
        "super.users": "User:broker;User:admin",
    }
    cluster = Cluster(tmp_path, f"sqlite://{tmp_path}/metastore.db", 3, settings)
    ssl_ports = {}
    for broker in cluster.brokers:
        ssl_ports[broker.broker_id] = free_port()
        broker.settings["listeners"] = (
            f"PLAINTEXT://127.0.0.1:{broker.port},SSL://127.0.0.1:{ssl_ports[broker.broker_id]}"
        )

    def conf(user: str) -> dict[str, str]:
        cert, key = certs.users[user]
        return {
            "bootstrap.servers": ",".join(f"127.0.0.1:{p}" for p in ssl_ports.values()),
            "security.protocol": "SSL",
            "ssl.ca.location": str(certs.ca),
            "ssl.certificate.location": str(cert),
            "ssl.key.location": str(key),
        }

    with cluster:
        admin = AdminClient(conf("admin"))
        topic = NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "2"})
        admin.create_topics([topic], operation_timeout=30)[TOPIC].result(60)
        eventually(lambda: _leader(admin)[0] >= 0, 30, "a leader")
        bindings = [
            _allow(AclOperation.WRITE, TOPIC, ResourceType.TOPIC),
            _allow(AclOperation.READ, TOPIC, ResourceType.TOPIC),
            _allow(AclOperation.READ, "guarded-readers", ResourceType.GROUP),
        ]
        for future in admin.create_acls(bindings).values():
            future.result(60)
        # Created through one broker, followed by every broker (each answers from its own
        # authorizer).
        for port in ssl_ports.values():
            eventually(
                lambda port=port: acls_answered(conf("admin"), port, "User:alice") == len(bindings),
                30,
                f"the broker on {port} to follow the ACLs",
            )

        # acks=all with min.insync.replicas=2: acknowledged only once followers fetched
        # from the leader over TLS as User:broker.
        before = [b"before-%d" % i for i in range(500)]
        _produce(conf("alice"), before)
        leader, _ = _leader(admin)
        eventually(lambda: len(_leader(admin)[1]) == 3, 30, "every replica in the ISR")

        cluster.kill(leader)
        eventually(lambda: _leader(admin)[0] not in (-1, leader), 60, "a new leader")
        after = [b"after-%d" % i for i in range(300)]
        _produce(conf("alice"), after)

        consumer = ck.Consumer(
            {**conf("alice"), "group.id": "guarded-readers", "auto.offset.reset": "earliest"}
        )
        consumer.subscribe([TOPIC])
        got: list[bytes] = []
        for _ in range(BOUND_S):
            for message in consumer.consume(1000, 1.0):
                assert message.error() is None, message.error()
                got.append(message.value())
            if len(got) >= len(before) + len(after):
                break
        consumer.close()
        assert got == before + after
