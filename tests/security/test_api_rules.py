"""The per-API rules through the wire, in process: a client on a PLAINTEXT listener
(User:ANONYMOUS, no super user) is refused with Kafka's error for the resource, and the
same request passes that check once the ACL the table names is stored (through the
broker's ACL store, as CreateAcls stores it). Without an authorizer the ACL APIs answer
SECURITY_DISABLED."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from inprocess_broker import broker_config, connect, run, running_broker
from kafka.protocol.admin import (
    CreateAclsRequest,
    CreatePartitionsRequest,
    DeleteTopicsRequest,
    DescribeAclsRequest,
    DescribeConfigsRequest,
    DescribeGroupsRequest,
    DescribeProducersRequest,
    DescribeTransactionsRequest,
    ElectLeadersRequest,
    IncrementalAlterConfigsRequest,
)
from kafka.protocol.admin.cluster import AlterReplicaLogDirsRequest, DescribeLogDirsRequest
from kafka.protocol.consumer import ListOffsetsRequest, OffsetFetchRequest
from kafka.protocol.producer import (
    AddPartitionsToTxnRequest,
    InitProducerIdRequest,
    WriteTxnMarkersRequest,
)

from epochlog.broker.broker import Broker
from epochlog.protocol.errors import ErrorCode
from epochlog.seams.real import real_seams
from epochlog.security.acls import (
    CLUSTER_NAME,
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from support.requests import fetch_request

ANONYMOUS = "User:ANONYMOUS"
TOPIC, GROUP, CLUSTER, TXN = (
    ResourceType.TOPIC,
    ResourceType.GROUP,
    ResourceType.CLUSTER,
    ResourceType.TRANSACTIONAL_ID,
)
Op = AclOperation
E = ErrorCode


def grant(resource: ResourceType, name: str, operation: AclOperation) -> AclBinding:
    return AclBinding(
        ResourcePattern(resource, name, PatternType.LITERAL),
        AccessControlEntry(ANONYMOUS, "*", operation, AclPermissionType.ALLOW),
    )


@dataclass(frozen=True)
class Case:
    request: Any
    version: int
    codes: Callable[[Any], list[int]]
    refused: ErrorCode
    acl: AclBinding


def _list_offsets() -> Any:
    part = ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
        partition_index=0, current_leader_epoch=-1, timestamp=-1
    )
    return ListOffsetsRequest(
        replica_id=-1,
        isolation_level=0,
        topics=[ListOffsetsRequest.ListOffsetsTopic(name="t", partitions=[part])],
    )


def _marker() -> Any:
    topic = WriteTxnMarkersRequest.WritableTxnMarker.WritableTxnMarkerTopic(
        name="t", partition_indexes=[0]
    )
    return WriteTxnMarkersRequest(
        markers=[
            WriteTxnMarkersRequest.WritableTxnMarker(
                producer_id=1,
                producer_epoch=0,
                transaction_result=False,
                topics=[topic],
                coordinator_epoch=0,
            )
        ]
    )


def _verify_only() -> Any:
    """AddPartitionsToTxn v4 as a partition leader sends it (KIP-890)."""
    return AddPartitionsToTxnRequest(
        transactions=[
            AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction(
                transactional_id="tx",
                producer_id=1,
                producer_epoch=0,
                verify_only=True,
                topics=[
                    AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name="t", partitions=[0])
                ],
            )
        ]
    )


def _move_to_nowhere() -> Any:
    Dir = AlterReplicaLogDirsRequest.AlterReplicaLogDir
    topic = Dir.AlterReplicaLogDirTopic(name="t", partitions=[0])
    return AlterReplicaLogDirsRequest(dirs=[Dir(path="/nowhere", topics=[topic])])


def _partitions(response: Any) -> list[int]:
    return [p.error_code for t in response.topics for p in t.partitions]


CASES = {
    "ListOffsets needs DESCRIBE on the topic": Case(
        _list_offsets(), 7, _partitions, E.TOPIC_AUTHORIZATION_FAILED, grant(TOPIC, "t", Op.READ)
    ),
    "Fetch from a replica needs CLUSTER_ACTION": Case(
        fetch_request("t", 0, replica_id=1, min_bytes=0),
        12,
        lambda r: [p.error_code for t in r.responses for p in t.partitions],
        E.TOPIC_AUTHORIZATION_FAILED,
        grant(CLUSTER, CLUSTER_NAME, Op.CLUSTER_ACTION),
    ),
    "DeleteTopics needs DELETE": Case(
        DeleteTopicsRequest(topic_names=["t"], timeout_ms=5000),
        5,
        lambda r: [t.error_code for t in r.responses],
        E.TOPIC_AUTHORIZATION_FAILED,
        grant(TOPIC, "t", Op.DELETE),
    ),
    "CreatePartitions needs ALTER on the topic": Case(
        CreatePartitionsRequest(
            topics=[
                CreatePartitionsRequest.CreatePartitionsTopic(name="t", count=2, assignments=None)
            ],
            timeout_ms=5000,
            validate_only=True,
        ),
        3,
        lambda r: [t.error_code for t in r.results],
        E.TOPIC_AUTHORIZATION_FAILED,
        grant(TOPIC, "t", Op.ALTER),
    ),
    "DescribeConfigs of a topic needs DESCRIBE_CONFIGS (ALTER_CONFIGS implies it)": Case(
        DescribeConfigsRequest(
            resources=[
                DescribeConfigsRequest.DescribeConfigsResource(
                    resource_type=2, resource_name="t", configuration_keys=None
                )
            ],
            include_synonyms=False,
            include_documentation=False,
        ),
        4,
        lambda r: [x.error_code for x in r.results],
        E.TOPIC_AUTHORIZATION_FAILED,
        grant(TOPIC, "t", Op.ALTER_CONFIGS),
    ),
    "DescribeConfigs of a broker needs DESCRIBE_CONFIGS on the cluster": Case(
        DescribeConfigsRequest(
            resources=[
                DescribeConfigsRequest.DescribeConfigsResource(
                    resource_type=4, resource_name="0", configuration_keys=None
                )
            ],
            include_synonyms=False,
            include_documentation=False,
        ),
        4,
        lambda r: [x.error_code for x in r.results],
        E.CLUSTER_AUTHORIZATION_FAILED,
        grant(CLUSTER, CLUSTER_NAME, Op.DESCRIBE_CONFIGS),
    ),
    "IncrementalAlterConfigs needs ALTER_CONFIGS": Case(
        IncrementalAlterConfigsRequest(
            resources=[
                IncrementalAlterConfigsRequest.AlterConfigsResource(
                    resource_type=2,
                    resource_name="t",
                    configs=[
                        IncrementalAlterConfigsRequest.AlterConfigsResource.AlterableConfig(
                            name="retention.ms", config_operation=0, value="1000"
                        )
                    ],
                )
            ],
            validate_only=True,
        ),
        1,
        lambda r: [x.error_code for x in r.responses],
        E.TOPIC_AUTHORIZATION_FAILED,
        grant(TOPIC, "t", Op.ALTER_CONFIGS),
    ),
    "an idempotent InitProducerId needs WRITE on some topic (KIP-679)": Case(
        InitProducerIdRequest(
            transactional_id=None, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1
        ),
        4,
        lambda r: [r.error_code],
        E.CLUSTER_AUTHORIZATION_FAILED,
        grant(TOPIC, "t", Op.WRITE),
    ),
    "WriteTxnMarkers needs CLUSTER_ACTION": Case(
        _marker(),
        1,
        lambda r: [p.error_code for m in r.markers for t in m.topics for p in t.partitions],
        E.CLUSTER_AUTHORIZATION_FAILED,
        grant(CLUSTER, CLUSTER_NAME, Op.CLUSTER_ACTION),
    ),
    "AddPartitionsToTxn v4 (from brokers) needs CLUSTER_ACTION": Case(
        _verify_only(),
        4,
        lambda r: [r.error_code],
        E.CLUSTER_AUTHORIZATION_FAILED,
        grant(CLUSTER, CLUSTER_NAME, Op.CLUSTER_ACTION),
    ),
    "DescribeProducers needs READ on the topic": Case(
        DescribeProducersRequest(
            topics=[DescribeProducersRequest.TopicRequest(name="t", partition_indexes=[0])]
        ),
        0,
        _partitions,
        E.TOPIC_AUTHORIZATION_FAILED,
        grant(TOPIC, "t", Op.READ),
    ),
    "DescribeLogDirs needs DESCRIBE on the cluster": Case(
        DescribeLogDirsRequest(topics=None),
        4,
        lambda r: [r.error_code],
        E.CLUSTER_AUTHORIZATION_FAILED,
        grant(CLUSTER, CLUSTER_NAME, Op.DESCRIBE),
    ),
    "AlterReplicaLogDirs needs ALTER on the cluster": Case(
        _move_to_nowhere(),
        2,
        lambda r: [p.error_code for t in r.results for p in t.partitions],
        E.CLUSTER_AUTHORIZATION_FAILED,
        grant(CLUSTER, CLUSTER_NAME, Op.ALTER),
    ),
    "DescribeGroups needs DESCRIBE on the group": Case(
        DescribeGroupsRequest(groups=["g"], include_authorized_operations=False),
        5,
        lambda r: [g.error_code for g in r.groups],
        E.GROUP_AUTHORIZATION_FAILED,
        grant(GROUP, "g", Op.DESCRIBE),
    ),
    "OffsetFetch needs DESCRIBE on the group": Case(
        OffsetFetchRequest(
            groups=[OffsetFetchRequest.OffsetFetchRequestGroup(group_id="g", topics=None)],
            require_stable=False,
        ),
        8,
        lambda r: [g.error_code for g in r.groups],
        E.GROUP_AUTHORIZATION_FAILED,
        grant(GROUP, "g", Op.READ),
    ),
    "DescribeTransactions needs DESCRIBE on the transactional id": Case(
        DescribeTransactionsRequest(transactional_ids=["tx"]),
        0,
        lambda r: [s.error_code for s in r.transaction_states],
        E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        grant(TXN, "tx", Op.WRITE),
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=list(CASES))
def test_each_api_refuses_without_its_acl_and_passes_the_check_with_it(
    tmp_path: Path, case: Case
) -> None:
    async def scenario() -> tuple[list[int], list[int]]:
        settings = {"authorizer_class_name": "kafka.security.authorizer.AclAuthorizer"}
        async with running_broker(tmp_path, **settings) as broker:
            await broker.create_topic("t", 1, 1, {})
            conn = await connect(broker)
            before = case.codes(await conn.send(case.request, case.version))
            assert broker.acl_store is not None
            await broker.acl_store.add([case.acl])
            after = case.codes(await conn.send(case.request, case.version))
            await conn.close()
            return before, after

    before, after = run(scenario)
    assert before and set(before) == {case.refused}
    assert case.refused not in after


def test_a_refused_election_of_all_partitions_names_no_topic(tmp_path: Path) -> None:
    """ElectLeaders with no partitions named means all of them; refused, the answer is
    the request's error alone, as Kafka's, not the cluster's topic list."""

    async def scenario() -> tuple[int, list[str]]:
        settings = {"authorizer_class_name": "kafka.security.authorizer.AclAuthorizer"}
        async with running_broker(tmp_path, **settings) as broker:
            await broker.create_topic("secret-topic", 1, 1, {})
            conn = await connect(broker)
            request = ElectLeadersRequest(election_type=0, topic_partitions=None, timeout_ms=1000)
            response = await conn.send(request, 2)
            await conn.close()
            return response.error_code, [r.topic for r in response.replica_election_results]

    assert run(scenario) == (E.CLUSTER_AUTHORIZATION_FAILED, [])


def test_the_acl_apis_answer_security_disabled_without_an_authorizer(tmp_path: Path) -> None:
    async def scenario() -> tuple[int, int]:
        async with running_broker(tmp_path) as broker:
            conn = await connect(broker)
            created = await conn.send(
                CreateAclsRequest(
                    creations=[
                        CreateAclsRequest.AclCreation(
                            resource_type=TOPIC, resource_name="t", resource_pattern_type=3,
                            principal=ANONYMOUS, host="*", operation=Op.READ, permission_type=3,
                        )
                    ]
                ),
                2,
            )  # fmt: skip
            described = await conn.send(
                DescribeAclsRequest(
                    resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
                    principal_filter=None, host_filter=None, operation=1, permission_type=1,
                ),
                2,
            )  # fmt: skip
            await conn.close()
            return created.results[0].error_code, described.error_code

    assert run(scenario) == (E.SECURITY_DISABLED, E.SECURITY_DISABLED)


def test_kafka_pythons_admin_creates_describes_and_deletes_acls(tmp_path: Path) -> None:
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePatternFilter,
    )
    from kafka.admin import ResourcePattern as KafkaResourcePattern
    from kafka.admin import ResourceType as KafkaResourceType

    def round_trip(port: int) -> tuple[Any, Any, Any]:
        admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{port}")
        pattern = KafkaResourcePattern(
            KafkaResourceType.TOPIC, "kp-", ACLResourcePatternType.PREFIXED
        )
        acl = ACL("User:alice", "*", ACLOperation.READ, ACLPermissionType.ALLOW, pattern)
        everything = ACLFilter(
            None, None, ACLOperation.ANY, ACLPermissionType.ANY,
            ResourcePatternFilter(KafkaResourceType.ANY, None, ACLResourcePatternType.ANY),
        )  # fmt: skip
        try:
            created = admin.create_acls([acl])
            described, _ = admin.describe_acls(everything)
            ((_, deleted, _),) = admin.delete_acls([everything])
            return created, described, deleted
        finally:
            admin.close()

    async def scenario() -> tuple[Any, Any, Any, list[AclBinding]]:
        settings = {
            "authorizer_class_name": "kafka.security.authorizer.AclAuthorizer",
            "super_users": ANONYMOUS,
        }
        async with running_broker(tmp_path, **settings) as broker:
            loop = asyncio.get_running_loop()
            answers = await loop.run_in_executor(None, round_trip, broker.port)
            assert broker.authorizer is not None
            return (*answers, broker.authorizer.bindings())

    created, described, deleted, left = run(scenario)
    assert created["failed"] == [] and len(created["succeeded"]) == 1
    assert [(a.principal, a.resource_pattern.resource_name) for a in described] == [
        ("User:alice", "kp-")
    ]
    assert len(deleted) == 1 and left == []


def test_a_broker_warns_when_acls_are_on_and_brokers_would_act_anonymously(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    on = "kafka.security.authorizer.AclAuthorizer"
    with caplog.at_level(logging.WARNING, logger="epochlog.broker"):
        Broker(broker_config(tmp_path / "a", authorizer_class_name=on), real_seams(seed=1))
        warned = [r.getMessage() for r in caplog.records]
        caplog.clear()
        Broker(
            broker_config(tmp_path / "b", authorizer_class_name=on, super_users=ANONYMOUS),
            real_seams(seed=1),
        )
        Broker(broker_config(tmp_path / "c"), real_seams(seed=1))
    assert len(warned) == 1 and "inter-broker listener PLAINTEXT identifies no broker" in warned[0]
    assert caplog.records == []


def test_delete_topics_by_id_resolves_no_id_for_whoever_may_not_describe_the_topic(
    tmp_path: Path,
) -> None:
    async def scenario() -> list[tuple[str | None, int]]:
        settings = {"authorizer_class_name": "kafka.security.authorizer.AclAuthorizer"}
        async with running_broker(tmp_path, **settings) as broker:
            created = await broker.create_topic("t", 1, 1, {})
            assert created is not None and broker.acl_store is not None
            request = DeleteTopicsRequest(
                topics=[DeleteTopicsRequest.DeleteTopicState(name=None, topic_id=created.topic_id)],
                timeout_ms=5000,
            )
            conn = await connect(broker)
            answers = []
            for acl in (None, grant(TOPIC, "t", Op.DESCRIBE), grant(TOPIC, "t", Op.DELETE)):
                if acl is not None:
                    await broker.acl_store.add([acl])
                (result,) = (await conn.send(request, 6)).responses
                answers.append((result.name, result.error_code))
            await conn.close()
            return answers

    assert run(scenario) == [
        (None, E.UNKNOWN_TOPIC_ID),
        ("t", E.TOPIC_AUTHORIZATION_FAILED),
        ("t", E.NONE),
    ]
