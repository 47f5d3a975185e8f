"""ACLs against a real broker process whose SSL listener requires client certificates:
alice, bob and admin (a super user) are told apart by their certificates' subjects
(ssl.principal.mapping.rules). Each refusal is Kafka's error with nothing changed, and
the same call succeeds once the ACL is added, through confluent-kafka's AdminClient or
``epochlog acls add``."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kafka.protocol.admin import (
    AlterPartitionReassignmentsRequest,
    DescribeAclsRequest,
    ListPartitionReassignmentsRequest,
)
from kafka.protocol.consumer import OffsetForLeaderEpochRequest

from epochlog.client.connection import BrokerConnection
from epochlog.client.security import client_network
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.records import build_batch
from epochlog.seams.real import real_seams
from epochlog.tools.local_ports import free_port
from support.broker import BrokerProcess, epochlog_command, wait_until
from support.certs import CN_RULES, UserCerts, make_user_certs, ssl_listener_settings
from support.requests import produce_request

pytestmark = pytest.mark.interop

BOUND_S = 60
USERS = ("admin", "alice", "bob")


@pytest.fixture(scope="module")
def user_certs(tmp_path_factory: pytest.TempPathFactory) -> UserCerts:
    return make_user_certs(tmp_path_factory.mktemp("acl-certs"), *USERS)


@pytest.fixture(scope="module")
def acl_broker(
    tmp_path_factory: pytest.TempPathFactory, user_certs: UserCerts
) -> Iterator[tuple[BrokerProcess, int]]:
    """A broker with ACLs on; PLAINTEXT only for the harness's ApiVersions probe (its
    ANONYMOUS principal may do nothing else)."""
    base = tmp_path_factory.mktemp("acl-broker")
    settings = {
        **ssl_listener_settings(user_certs),
        "ssl.principal.mapping.rules": CN_RULES,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        # The brokers talk to each other (transaction markers) as User:broker over TLS.
        "inter.broker.listener.name": "SSL",
        "super.users": "User:broker;User:admin",
        "auto.create.topics.enable": "false",
    }
    broker = BrokerProcess(base / "logs", base, settings)
    ssl_port = free_port()
    broker.settings["listeners"] = f"PLAINTEXT://127.0.0.1:{broker.port},SSL://127.0.0.1:{ssl_port}"
    broker.start()
    yield broker, ssl_port
    try:
        broker.stop()
    finally:
        broker.close()


def conf(certs: UserCerts, port: int, user: str) -> dict[str, str]:
    cert, key = certs.users[user]
    return {
        "bootstrap.servers": f"127.0.0.1:{port}",
        "security.protocol": "SSL",
        "ssl.ca.location": str(certs.ca),
        "ssl.certificate.location": str(cert),
        "ssl.key.location": str(key),
    }


@pytest.fixture
def as_user(acl_broker: tuple[BrokerProcess, int], user_certs: UserCerts):  # noqa: ANN201
    return lambda user: conf(user_certs, acl_broker[1], user)


def allow(
    principal: str,
    operation: AclOperation,
    name: str,
    resource: ResourceType = ResourceType.TOPIC,
    pattern: ResourcePatternType = ResourcePatternType.LITERAL,
) -> AclBinding:
    return AclBinding(resource, name, pattern, principal, "*", operation, AclPermissionType.ALLOW)


def add_acls(admin_conf: dict[str, str], *bindings: AclBinding) -> None:
    admin = AdminClient(admin_conf)  # alive until every future is answered
    for future in admin.create_acls(list(bindings)).values():
        future.result(BOUND_S)


def create_topic(admin_conf: dict[str, str], name: str) -> None:
    admin = AdminClient(admin_conf)
    admin.create_topics([NewTopic(name, 1, 1)], operation_timeout=30)[name].result(BOUND_S)


def end_offset(admin_conf: dict[str, str], topic: str) -> int:
    consumer = ck.Consumer({**admin_conf, "group.id": "admin-watermarks"})
    try:
        return consumer.get_watermark_offsets(ck.TopicPartition(topic, 0), BOUND_S)[1]
    finally:
        consumer.close()


def produce(user_conf: dict[str, str], topic: str, count: int) -> list[ck.KafkaError | None]:
    producer = ck.Producer({**user_conf, "acks": "all", "message.timeout.ms": 10000})
    outcomes: list[ck.KafkaError | None] = []
    for i in range(count):
        producer.produce(topic, b"v%d" % i, on_delivery=lambda err, _m: outcomes.append(err))
    producer.flush(BOUND_S)
    return outcomes


def read(user_conf: dict[str, str], topic: str, count: int, group: str | None = None) -> tuple:
    """(values, error codes) read from the start: in ``group`` by subscription, else by
    assignment with nothing committed."""
    settings = {"group.id": group or "unused", "auto.offset.reset": "earliest"}
    if group is None:
        settings["enable.auto.commit"] = "false"
    consumer = ck.Consumer({**user_conf, **settings})
    if group is not None:
        consumer.subscribe([topic])
    else:
        consumer.assign([ck.TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    errors: list[int] = []
    for _ in range(BOUND_S):
        for message in consumer.consume(100, 0.5):
            if message.error():
                errors.append(message.error().code())
            else:
                values.append(message.value())
        if len(values) >= count or errors:
            break
    consumer.close()
    return values, errors


def epochlog_acls(certs: UserCerts, port: int, folder: Path, *args: str) -> str:
    """``epochlog acls ...`` as admin, with a client properties file (--command-config)."""
    properties = folder / "admin.properties"
    properties.write_text(
        "".join(
            f"{k}={v}\n" for k, v in conf(certs, port, "admin").items() if k != "bootstrap.servers"
        )
    )
    command = epochlog_command() + ["acls", *args, "--bootstrap-server", f"127.0.0.1:{port}"]
    result = subprocess.run(
        [*command, "--command-config", str(properties)],
        capture_output=True,
        text=True,
        timeout=BOUND_S,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


async def _send_as(certs: UserCerts, port: int, user: str, request: Any, version: int) -> Any:
    user_conf = conf(certs, port, user)
    seams = real_seams()
    network = client_network(
        {
            "security.protocol": "ssl",
            "ssl.ca.location": user_conf["ssl.ca.location"],
            "ssl.certificate.location": user_conf["ssl.certificate.location"],
            "ssl.key.location": user_conf["ssl.key.location"],
            "ssl.key.password": "",
            "ssl.endpoint.identification.algorithm": "https",
        },
        seams,
    )
    conn = await BrokerConnection.open(network, "127.0.0.1", port)
    try:
        return await conn.send(request, version)
    finally:
        await conn.close()


def send_as(certs: UserCerts, port: int, user: str, request: Any, version: int) -> Any:
    return asyncio.run(_send_as(certs, port, user, request, version))


def test_produce_without_write_is_refused_and_nothing_is_appended(
    acl_broker: tuple[BrokerProcess, int], user_certs: UserCerts, as_user: Any
) -> None:
    admin, alice = as_user("admin"), as_user("alice")
    create_topic(admin, "orders")
    # alice may see the topic, so librdkafka sends the Produce itself.
    add_acls(admin, allow("User:alice", AclOperation.DESCRIBE, "orders"))
    outcomes = produce(alice, "orders", 20)
    assert {e.code() if e else None for e in outcomes} == {ck.KafkaError.TOPIC_AUTHORIZATION_FAILED}
    raw = send_as(
        user_certs,
        acl_broker[1],
        "alice",
        produce_request("orders", build_batch([(None, b"x", [], 0)])),
        9,
    )
    assert raw.responses[0].partition_responses[0].error_code == (
        ErrorCode.TOPIC_AUTHORIZATION_FAILED
    )
    assert end_offset(admin, "orders") == 0

    add_acls(admin, allow("User:alice", AclOperation.WRITE, "orders"))
    assert produce(alice, "orders", 20) == [None] * 20
    assert end_offset(admin, "orders") == 20


def test_fetch_without_read_is_refused_until_epochlog_acls_adds_it_and_again_once_removed(
    acl_broker: tuple[BrokerProcess, int], user_certs: UserCerts, as_user: Any, tmp_path: Path
) -> None:
    admin, bob = as_user("admin"), as_user("bob")
    create_topic(admin, "ledger")
    assert produce(admin, "ledger", 5) == [None] * 5
    # A librdkafka consumer with a group.id asks its coordinator even when assigned.
    add_acls(
        admin,
        allow("User:bob", AclOperation.DESCRIBE, "ledger"),
        allow("User:bob", AclOperation.READ, "unused", ResourceType.GROUP),
    )
    values, errors = read(bob, "ledger", 5)
    assert values == [] and ck.KafkaError.TOPIC_AUTHORIZATION_FAILED in errors

    out = epochlog_acls(
        user_certs, acl_broker[1], tmp_path, "add", "--allow-principal", "User:bob",
        "--operation", "Read", "--topic", "ledger",
    )  # fmt: skip
    assert "principal=User:bob, host=*, operation=READ, permissionType=ALLOW" in out
    values, errors = read(bob, "ledger", 5)
    assert (values, errors) == ([b"v%d" % i for i in range(5)], [])
    listed = epochlog_acls(user_certs, acl_broker[1], tmp_path, "list", "--topic", "ledger")
    assert "name=ledger, patternType=LITERAL" in listed and "operation=READ" in listed

    # Removed again: bob's read is refused as before, and the ACL is no longer listed.
    removed = epochlog_acls(
        user_certs, acl_broker[1], tmp_path, "remove", "--allow-principal", "User:bob",
        "--operation", "Read", "--topic", "ledger",
    )  # fmt: skip
    assert "operation=READ" in removed, removed
    listed = epochlog_acls(user_certs, acl_broker[1], tmp_path, "list", "--topic", "ledger")
    assert "operation=READ" not in listed and "operation=DESCRIBE" in listed, listed
    values, errors = read(bob, "ledger", 5)
    assert values == [] and ck.KafkaError.TOPIC_AUTHORIZATION_FAILED in errors


def test_offsets_for_leader_epoch_needs_describe_from_a_client_and_cluster_action_from_a_replica(
    acl_broker: tuple[BrokerProcess, int], user_certs: UserCerts, as_user: Any
) -> None:
    admin = as_user("admin")
    create_topic(admin, "epochs")
    assert produce(admin, "epochs", 3) == [None] * 3

    def ask(replica_id: int) -> tuple[int, int]:
        request = OffsetForLeaderEpochRequest(
            replica_id=replica_id,
            topics=[
                OffsetForLeaderEpochRequest.OffsetForLeaderTopic(
                    topic="epochs",
                    partitions=[
                        OffsetForLeaderEpochRequest.OffsetForLeaderTopic.OffsetForLeaderPartition(
                            partition=0, current_leader_epoch=-1, leader_epoch=0
                        )
                    ],
                )
            ],
        )
        answer = send_as(user_certs, acl_broker[1], "bob", request, 3)
        part = answer.topics[0].partitions[0]
        return part.error_code, part.end_offset

    # Refused, the epoch's end withheld (UNDEFINED_EPOCH_OFFSET).
    assert ask(-1) == (ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1)
    add_acls(admin, allow("User:bob", AclOperation.DESCRIBE, "epochs"))
    assert ask(-1) == (ErrorCode.NONE, 3)
    # As a replica bob needs CLUSTER_ACTION, which DESCRIBE on the topic is not.
    assert ask(1)[0] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    add_acls(
        admin, allow("User:bob", AclOperation.CLUSTER_ACTION, "kafka-cluster", ResourceType.BROKER)
    )
    assert ask(1)[0] == ErrorCode.NONE


def test_a_group_without_read_is_refused_until_allowed(
    acl_broker: tuple[BrokerProcess, int], as_user: Any
) -> None:
    admin, alice = as_user("admin"), as_user("alice")
    create_topic(admin, "events")
    assert produce(admin, "events", 3) == [None] * 3
    add_acls(admin, allow("User:alice", AclOperation.READ, "events"))
    values, errors = read(alice, "events", 3, group="readers")
    assert values == [] and errors == [ck.KafkaError.GROUP_AUTHORIZATION_FAILED]
    # Nothing of the group was made: no member joined, no offset committed.
    groups = AdminClient(admin).list_consumer_groups().result(BOUND_S)
    assert "readers" not in {g.group_id for g in groups.valid}
    add_acls(admin, allow("User:alice", AclOperation.READ, "readers", ResourceType.GROUP))
    values, errors = read(alice, "events", 3, group="readers")
    assert (values, errors) == ([b"v0", b"v1", b"v2"], [])


def test_create_topics_and_elect_leaders_need_their_operations(
    acl_broker: tuple[BrokerProcess, int], as_user: Any
) -> None:
    admin, bob = as_user("admin"), as_user("bob")
    bob_admin = AdminClient(bob)
    refused = bob_admin.create_topics([NewTopic("bobs", 1, 1)], operation_timeout=30)["bobs"]
    with pytest.raises(ck.KafkaException) as caught:
        refused.result(BOUND_S)
    assert caught.value.args[0].code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert "bobs" not in AdminClient(admin).list_topics(timeout=BOUND_S).topics
    # CREATE on a prefix of topic names is enough for those names.
    add_acls(
        admin,
        allow("User:bob", AclOperation.CREATE, "bob", pattern=ResourcePatternType.PREFIXED),
    )
    bob_admin.create_topics([NewTopic("bobs", 1, 1)], operation_timeout=30)["bobs"].result(BOUND_S)

    partition = [ck.TopicPartition("bobs", 0)]
    with pytest.raises(ck.KafkaException) as caught:
        bob_admin.elect_leaders(ck.ElectionType.PREFERRED, partition).result(BOUND_S)
    assert caught.value.args[0].code() == ck.KafkaError.CLUSTER_AUTHORIZATION_FAILED
    add_acls(admin, allow("User:bob", AclOperation.ALTER, "kafka-cluster", ResourceType.BROKER))
    outcome = bob_admin.elect_leaders(ck.ElectionType.PREFERRED, partition).result(BOUND_S)
    assert outcome[partition[0]].code() == ck.KafkaError.ELECTION_NOT_NEEDED


def test_metadata_leaves_out_topics_the_principal_may_not_describe(
    acl_broker: tuple[BrokerProcess, int], as_user: Any
) -> None:
    admin = as_user("admin")
    for name in ("shown-1", "shown-2", "secret"):
        create_topic(admin, name)
    add_acls(
        admin,
        allow("User:alice", AclOperation.DESCRIBE, "shown-", pattern=ResourcePatternType.PREFIXED),
    )
    seen = set(AdminClient(as_user("alice")).list_topics(timeout=BOUND_S).topics)
    assert {"shown-1", "shown-2"} <= seen and "secret" not in seen
    assert "secret" in AdminClient(admin).list_topics(timeout=BOUND_S).topics


def test_describe_and_delete_acls_round_trip_with_confluent_kafka(
    acl_broker: tuple[BrokerProcess, int], user_certs: UserCerts, as_user: Any
) -> None:
    admin_client = AdminClient(as_user("admin"))
    bindings = [
        allow("User:carol", AclOperation.READ, "audit"),
        allow("User:carol", AclOperation.WRITE, "audit-", pattern=ResourcePatternType.PREFIXED),
        AclBinding(ResourceType.GROUP, "auditors", ResourcePatternType.LITERAL, "User:carol",
                   "10.1.2.3", AclOperation.READ, AclPermissionType.DENY),
    ]  # fmt: skip
    add_acls(as_user("admin"), *bindings)
    carol = AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, "User:carol", None,
        AclOperation.ANY, AclPermissionType.ANY,
    )  # fmt: skip
    assert set(admin_client.describe_acls(carol).result(BOUND_S)) == set(bindings)
    # Alice has no ACL on the cluster: she may neither describe nor delete ACLs.
    # (confluent-kafka hands back an empty list for a refused DescribeAcls: asked raw.)
    refused = send_as(user_certs, acl_broker[1], "alice", DescribeAclsRequest(
        resource_type_filter=ResourceType.ANY.value, resource_name_filter=None,
        pattern_type_filter=ResourcePatternType.ANY.value, principal_filter="User:carol",
        host_filter=None, operation=AclOperation.ANY.value,
        permission_type=AclPermissionType.ANY.value,
    ), 2)  # fmt: skip
    assert (refused.error_code, refused.resources) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, [])
    alice_admin = AdminClient(as_user("alice"))
    (refused_delete,) = alice_admin.delete_acls([carol]).values()
    with pytest.raises(ck.KafkaException) as caught:
        refused_delete.result(BOUND_S)
    assert caught.value.args[0].code() == ck.KafkaError.CLUSTER_AUTHORIZATION_FAILED
    assert set(admin_client.describe_acls(carol).result(BOUND_S)) == set(bindings)

    (deleted,) = admin_client.delete_acls([carol]).values()
    assert set(deleted.result(BOUND_S)) == set(bindings)
    assert admin_client.describe_acls(carol).result(BOUND_S) == []


def test_a_transactional_producer_needs_write_on_its_transactional_id(
    acl_broker: tuple[BrokerProcess, int], as_user: Any
) -> None:
    admin, alice = as_user("admin"), as_user("alice")
    create_topic(admin, "txn-orders")
    add_acls(admin, allow("User:alice", AclOperation.WRITE, "txn-orders"))
    settings = {**alice, "transactional.id": "alice-txn", "transaction.timeout.ms": 60000}
    refused = ck.Producer(settings)
    with pytest.raises(ck.KafkaException) as caught:
        refused.init_transactions(BOUND_S)
    assert caught.value.args[0].code() == ck.KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert end_offset(admin, "txn-orders") == 0

    add_acls(
        admin, allow("User:alice", AclOperation.WRITE, "alice-txn", ResourceType.TRANSACTIONAL_ID)
    )
    producer = ck.Producer(settings)
    producer.init_transactions(BOUND_S)
    producer.begin_transaction()
    for i in range(10):
        producer.produce("txn-orders", b"t%d" % i)
    producer.commit_transaction(BOUND_S)
    # Ten records and the commit marker, which the coordinator writes once EndTxn is
    # answered (a WriteTxnMarkers as User:broker): read_committed's end moves past both.
    wait_until(lambda: end_offset(admin, "txn-orders") == 11, BOUND_S, "the commit marker")


def test_partition_reassignments_need_alter_and_describe_on_the_cluster(
    acl_broker: tuple[BrokerProcess, int], user_certs: UserCerts, as_user: Any
) -> None:
    port = acl_broker[1]
    create_topic(as_user("admin"), "moves")
    cancel = AlterPartitionReassignmentsRequest(
        timeout_ms=10000,
        topics=[
            AlterPartitionReassignmentsRequest.ReassignableTopic(
                name="moves",
                partitions=[
                    AlterPartitionReassignmentsRequest.ReassignableTopic.ReassignablePartition(
                        partition_index=0, replicas=None
                    )
                ],
            )
        ],
    )
    listing = ListPartitionReassignmentsRequest(timeout_ms=10000, topics=None)

    def alter_errors() -> tuple[int, int]:
        answer = send_as(user_certs, port, "alice", cancel, 0)
        return answer.error_code, answer.responses[0].partitions[0].error_code

    refused = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert alter_errors() == (refused, refused)
    assert send_as(user_certs, port, "alice", listing, 0).error_code == refused
    admin = as_user("admin")
    add_acls(
        admin, allow("User:alice", AclOperation.DESCRIBE, "kafka-cluster", ResourceType.BROKER)
    )
    assert send_as(user_certs, port, "alice", listing, 0).error_code == ErrorCode.NONE
    add_acls(admin, allow("User:alice", AclOperation.ALTER, "kafka-cluster", ResourceType.BROKER))
    assert alter_errors() == (ErrorCode.NONE, ErrorCode.NO_REASSIGNMENT_IN_PROGRESS)
