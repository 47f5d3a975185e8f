"""What each API needs, in one table (Kafka's "Operations and Resources on Protocols"),
and the one helper every handler asks through (with the broker's authorizer). Without
an authorizer (``authorizer.class.name`` empty) everything is allowed.

A handler names its API and which of its checks it makes (an API may check several
resources: OffsetCommit the group and each topic); the table gives the resource type
and operation, and the resource type gives Kafka's error for a refusal."""

from __future__ import annotations

from epochlog.protocol.apis import ApiKey
from epochlog.protocol.errors import ErrorCode
from epochlog.security.acls import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    AclOperation,
    ResourceType,
)
from epochlog.security.authorizer import Authorizer
from epochlog.security.session import Session

TOPIC, GROUP, CLUSTER, TXN = (
    ResourceType.TOPIC,
    ResourceType.GROUP,
    ResourceType.CLUSTER,
    ResourceType.TRANSACTIONAL_ID,
)
Op = AclOperation

# api -> check -> (resource type, operation)
RULES: dict[int, dict[str, tuple[ResourceType, AclOperation]]] = {
    ApiKey.PRODUCE: {"topic": (TOPIC, Op.WRITE), "transactional_id": (TXN, Op.WRITE)},
    ApiKey.FETCH: {"topic": (TOPIC, Op.READ), "replica": (CLUSTER, Op.CLUSTER_ACTION)},
    ApiKey.LIST_OFFSETS: {"topic": (TOPIC, Op.DESCRIBE)},
    # KIP-320: a client needs DESCRIBE on the topic, a replica CLUSTER_ACTION.
    ApiKey.OFFSET_FOR_LEADER_EPOCH: {
        "topic": (TOPIC, Op.DESCRIBE),
        "replica": (CLUSTER, Op.CLUSTER_ACTION),
    },
    ApiKey.METADATA: {
        "topic": (TOPIC, Op.DESCRIBE),
        "create_cluster": (CLUSTER, Op.CREATE),
        "create_topic": (TOPIC, Op.CREATE),
    },
    ApiKey.CREATE_TOPICS: {"cluster": (CLUSTER, Op.CREATE), "topic": (TOPIC, Op.CREATE)},
    ApiKey.DELETE_TOPICS: {"topic": (TOPIC, Op.DELETE), "describe": (TOPIC, Op.DESCRIBE)},
    ApiKey.CREATE_PARTITIONS: {"topic": (TOPIC, Op.ALTER)},
    ApiKey.ELECT_LEADERS: {"cluster": (CLUSTER, Op.ALTER)},
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: {"cluster": (CLUSTER, Op.ALTER)},
    ApiKey.LIST_PARTITION_REASSIGNMENTS: {"cluster": (CLUSTER, Op.DESCRIBE)},
    ApiKey.DESCRIBE_CONFIGS: {
        "topic": (TOPIC, Op.DESCRIBE_CONFIGS),
        "cluster": (CLUSTER, Op.DESCRIBE_CONFIGS),
    },
    ApiKey.INCREMENTAL_ALTER_CONFIGS: {
        "topic": (TOPIC, Op.ALTER_CONFIGS),
        "cluster": (CLUSTER, Op.ALTER_CONFIGS),
    },
    ApiKey.FIND_COORDINATOR: {
        "group": (GROUP, Op.DESCRIBE),
        "transactional_id": (TXN, Op.DESCRIBE),
    },
    ApiKey.JOIN_GROUP: {"group": (GROUP, Op.READ)},
    ApiKey.SYNC_GROUP: {"group": (GROUP, Op.READ)},
    ApiKey.HEARTBEAT: {"group": (GROUP, Op.READ)},
    ApiKey.LEAVE_GROUP: {"group": (GROUP, Op.READ)},
    ApiKey.OFFSET_COMMIT: {"group": (GROUP, Op.READ), "topic": (TOPIC, Op.READ)},
    ApiKey.OFFSET_FETCH: {"group": (GROUP, Op.DESCRIBE), "topic": (TOPIC, Op.DESCRIBE)},
    ApiKey.DESCRIBE_GROUPS: {"group": (GROUP, Op.DESCRIBE)},
    ApiKey.LIST_GROUPS: {"cluster": (CLUSTER, Op.DESCRIBE), "group": (GROUP, Op.DESCRIBE)},
    ApiKey.DELETE_GROUPS: {"group": (GROUP, Op.DELETE)},
    ApiKey.OFFSET_DELETE: {"group": (GROUP, Op.DELETE), "topic": (TOPIC, Op.READ)},
    # An idempotent producer: IDEMPOTENT_WRITE on the cluster, or (KIP-679, Kafka 3.0)
    # WRITE on any topic.
    ApiKey.INIT_PRODUCER_ID: {
        "transactional_id": (TXN, Op.WRITE),
        "idempotent": (CLUSTER, Op.IDEMPOTENT_WRITE),
        "any_topic": (TOPIC, Op.WRITE),
    },
    # v4 comes from partition leaders (KIP-890's verification): CLUSTER_ACTION.
    ApiKey.ADD_PARTITIONS_TO_TXN: {
        "transactional_id": (TXN, Op.WRITE),
        "topic": (TOPIC, Op.WRITE),
        "cluster": (CLUSTER, Op.CLUSTER_ACTION),
    },
    ApiKey.ADD_OFFSETS_TO_TXN: {"transactional_id": (TXN, Op.WRITE), "group": (GROUP, Op.READ)},
    ApiKey.END_TXN: {"transactional_id": (TXN, Op.WRITE)},
    ApiKey.TXN_OFFSET_COMMIT: {
        "transactional_id": (TXN, Op.WRITE),
        "group": (GROUP, Op.READ),
        "topic": (TOPIC, Op.READ),
    },
    ApiKey.WRITE_TXN_MARKERS: {"cluster": (CLUSTER, Op.CLUSTER_ACTION)},
    ApiKey.DESCRIBE_TRANSACTIONS: {
        "transactional_id": (TXN, Op.DESCRIBE),
        "topic": (TOPIC, Op.DESCRIBE),
    },
    ApiKey.LIST_TRANSACTIONS: {"transactional_id": (TXN, Op.DESCRIBE)},
    ApiKey.DESCRIBE_PRODUCERS: {"topic": (TOPIC, Op.READ)},
    ApiKey.CREATE_ACLS: {"cluster": (CLUSTER, Op.ALTER)},
    ApiKey.DESCRIBE_ACLS: {"cluster": (CLUSTER, Op.DESCRIBE)},
    ApiKey.DELETE_ACLS: {"cluster": (CLUSTER, Op.ALTER)},
    ApiKey.DELETE_RECORDS: {"topic": (TOPIC, Op.DELETE)},
    ApiKey.DESCRIBE_CLUSTER: {"cluster": (CLUSTER, Op.DESCRIBE)},
    ApiKey.DESCRIBE_LOG_DIRS: {"cluster": (CLUSTER, Op.DESCRIBE)},
    ApiKey.ALTER_REPLICA_LOG_DIRS: {"cluster": (CLUSTER, Op.ALTER)},
    ApiKey.ALTER_CONFIGS: {
        "topic": (TOPIC, Op.ALTER_CONFIGS),
        "cluster": (CLUSTER, Op.ALTER_CONFIGS),
    },
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: {"cluster": (CLUSTER, Op.DESCRIBE)},
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: {"cluster": (CLUSTER, Op.ALTER)},
    ApiKey.DESCRIBE_CLIENT_QUOTAS: {"cluster": (CLUSTER, Op.DESCRIBE_CONFIGS)},
    ApiKey.ALTER_CLIENT_QUOTAS: {"cluster": (CLUSTER, Op.ALTER_CONFIGS)},
}

# Kafka's error for a refusal, by the resource refused.
REFUSAL: dict[ResourceType, ErrorCode] = {
    TOPIC: ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    GROUP: ErrorCode.GROUP_AUTHORIZATION_FAILED,
    CLUSTER: ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    TXN: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
}


def _host(session: Session) -> str:
    return session.peer.rpartition(":")[0].strip("[]") or session.peer


def allowed(
    authorizer: Authorizer | None,
    session: Session,
    api: int,
    check: str,
    name: str = CLUSTER_NAME,
) -> bool:
    """May the session's principal make ``check`` of ``api`` on resource ``name``?"""
    if authorizer is None:
        return True
    resource_type, operation = RULES[api][check]
    return authorizer.authorize(session.principal, _host(session), operation, resource_type, name)


def allowed_on_any(authorizer: Authorizer | None, session: Session, api: int, check: str) -> bool:
    """May it make ``check`` on at least one resource of the check's type?"""
    if authorizer is None:
        return True
    resource_type, operation = RULES[api][check]
    return authorizer.authorize_any(session.principal, _host(session), operation, resource_type)


def refusal(
    authorizer: Authorizer | None,
    session: Session,
    api: int,
    check: str,
    name: str = CLUSTER_NAME,
) -> ErrorCode:
    """NONE when allowed, else Kafka's error for refusing that resource."""
    if allowed(authorizer, session, api, check, name):
        return ErrorCode.NONE
    return REFUSAL[RULES[api][check][0]]


def authorized_operations(
    authorizer: Authorizer | None,
    session: Session,
    resource_type: ResourceType,
    name: str = CLUSTER_NAME,
) -> set[int]:
    """What the session's principal may do to one resource, as the codes of the
    "authorized operations" bitfield (Kafka's AuthHelper.authorizedOperations): every
    operation an ACL on that resource type may name when there is no authorizer, else
    those the ACLs allow."""
    operations = SUPPORTED_OPERATIONS[resource_type]
    if authorizer is not None:
        host = _host(session)
        operations = frozenset(
            op
            for op in operations
            if authorizer.authorize(session.principal, host, op, resource_type, name)
        )
    return {int(op) for op in operations}
