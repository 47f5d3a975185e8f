"""Authorized operations as Kafka fills them in (DescribeCluster, Metadata v8+,
DescribeGroups v3+), asked for through confluent-kafka's and kafka-python's admin
clients: every operation valid for the resource type without an authorizer; with ACLs,
exactly what the session's principal (here a SASL/PLAIN user) may do; and left out
(Kafka's "not asked" value) when the client does not ask."""

from __future__ import annotations

from collections.abc import Iterator

import confluent_kafka as ck
import pytest
from confluent_kafka import TopicCollection, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from kafka import KafkaAdminClient

from epochlog.tools.local_ports import free_port
from support.broker import BrokerProcess
from support.clients import create_topic

BOUND_S = 60
PLAIN_JAAS = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";'
)
Op = AclOperation
EVERY_CLUSTER_OP = {
    Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, Op.IDEMPOTENT_WRITE,
    Op.ALTER, Op.DESCRIBE,
}  # fmt: skip
EVERY_TOPIC_OP = {
    Op.READ, Op.WRITE, Op.CREATE, Op.DESCRIBE, Op.DELETE, Op.ALTER, Op.DESCRIBE_CONFIGS,
    Op.ALTER_CONFIGS,
}  # fmt: skip
EVERY_GROUP_OP = {Op.READ, Op.DESCRIBE, Op.DELETE}


def _commit(conf: dict[str, str], group: str, topic: str) -> None:
    """A group with a committed offset (Empty, as after its members left)."""
    consumer = ck.Consumer({**conf, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
    finally:
        consumer.close()


def _operations(admin: AdminClient, topic: str, group: str) -> tuple[set, set, set]:
    cluster = admin.describe_cluster(include_authorized_operations=True, request_timeout=30)
    topics = admin.describe_topics(
        TopicCollection([topic]), include_authorized_operations=True, request_timeout=30
    )
    groups = admin.describe_consumer_groups(
        [group], include_authorized_operations=True, request_timeout=30
    )
    return (
        set(cluster.result(BOUND_S).authorized_operations),
        set(topics[topic].result(BOUND_S).authorized_operations),
        set(groups[group].result(BOUND_S).authorized_operations),
    )


def test_without_an_authorizer_every_operation_of_the_resource_type_is_reported(
    module_broker: BrokerProcess,
) -> None:
    conf = {"bootstrap.servers": module_broker.bootstrap}
    create_topic(module_broker.bootstrap, "ops-open")
    _commit(conf, "ops-open-group", "ops-open")
    admin = AdminClient(conf)
    assert _operations(admin, "ops-open", "ops-open-group") == (
        EVERY_CLUSTER_OP,
        EVERY_TOPIC_OP,
        EVERY_GROUP_OP,
    )
    # Not asked for: Kafka's "none" value, which the client reports as None.
    assert admin.describe_cluster(request_timeout=30).result(BOUND_S).authorized_operations is None
    described = admin.describe_topics(TopicCollection(["ops-open"]), request_timeout=30)
    assert described["ops-open"].result(BOUND_S).authorized_operations is None

    kp = KafkaAdminClient(bootstrap_servers=module_broker.bootstrap)
    try:
        names = {op.name for op in EVERY_CLUSTER_OP}
        assert set(kp.describe_cluster()["authorized_operations"]) == names
        [topic] = kp.describe_topics(["ops-open"])
        assert set(topic["authorized_operations"]) == {op.name for op in EVERY_TOPIC_OP}
        group = kp.describe_groups(["ops-open-group"])["ops-open-group"]
        assert set(group["authorized_operations"]) == {op.name for op in EVERY_GROUP_OP}
    finally:
        kp.close()


@pytest.fixture(scope="module")
def acl_broker(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[BrokerProcess, int]]:
    """ACLs on; PLAINTEXT is the operator's (a super user), SASL_PLAINTEXT alice's."""
    base = tmp_path_factory.mktemp("acl-broker")
    broker = BrokerProcess(base / "logs", base)
    sasl_port = free_port()
    broker.settings |= {
        "listeners": f"PLAINTEXT://127.0.0.1:{broker.port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.jaas.config": PLAIN_JAAS,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS",
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "3",
    }
    broker.start()
    yield broker, sasl_port
    try:
        broker.stop()
    finally:
        broker.close()


def _allow(resource: ResourceType, name: str, operation: AclOperation) -> AclBinding:
    return AclBinding(
        resource, name, ResourcePatternType.LITERAL, "User:alice", "*", operation,
        AclPermissionType.ALLOW,
    )  # fmt: skip


def test_with_acls_exactly_what_the_principal_may_do_is_reported(
    acl_broker: tuple[BrokerProcess, int],
) -> None:
    broker, sasl_port = acl_broker
    operator = {"bootstrap.servers": broker.bootstrap}
    create_topic(broker.bootstrap, "ops-guarded")
    _commit(operator, "ops-guarded-group", "ops-guarded")
    admin = AdminClient(operator)
    acls = [
        _allow(ResourceType.BROKER, "kafka-cluster", Op.DESCRIBE),
        _allow(ResourceType.TOPIC, "ops-guarded", Op.READ),
        _allow(ResourceType.TOPIC, "ops-guarded", Op.ALTER_CONFIGS),
        _allow(ResourceType.GROUP, "ops-guarded-group", Op.DELETE),
    ]
    for future in admin.create_acls(acls, request_timeout=30).values():
        future.result(BOUND_S)

    # The super user may do everything.
    assert _operations(admin, "ops-guarded", "ops-guarded-group") == (
        EVERY_CLUSTER_OP,
        EVERY_TOPIC_OP,
        EVERY_GROUP_OP,
    )
    alice = AdminClient(
        {
            "bootstrap.servers": f"127.0.0.1:{sasl_port}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "alice",
            "sasl.password": "alice-secret",
        }
    )
    # READ implies DESCRIBE, ALTER_CONFIGS DESCRIBE_CONFIGS, DELETE DESCRIBE (Kafka's rules).
    assert _operations(alice, "ops-guarded", "ops-guarded-group") == (
        {Op.DESCRIBE},
        {Op.READ, Op.DESCRIBE, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS},
        {Op.DELETE, Op.DESCRIBE},
    )
