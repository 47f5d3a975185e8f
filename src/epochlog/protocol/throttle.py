"""KIP-219: from which version of each response a client itself holds back for the
``throttle_time_ms`` the broker answered (Kafka's ``AbstractResponse.shouldClientThrottle``
per response). Before those versions the broker's muting alone enforces a quota."""

from __future__ import annotations

from epochlog.protocol.apis import ApiKey

# API key -> first version whose throttle time the client honours; absent: never.
CLIENT_THROTTLES_SINCE: dict[int, int] = {
    ApiKey.PRODUCE: 6,
    ApiKey.FETCH: 8,
    ApiKey.LIST_OFFSETS: 3,
    ApiKey.METADATA: 6,
    ApiKey.OFFSET_COMMIT: 4,
    ApiKey.OFFSET_FETCH: 4,
    ApiKey.FIND_COORDINATOR: 2,
    ApiKey.JOIN_GROUP: 3,
    ApiKey.HEARTBEAT: 2,
    ApiKey.LEAVE_GROUP: 2,
    ApiKey.SYNC_GROUP: 2,
    ApiKey.DESCRIBE_GROUPS: 2,
    ApiKey.LIST_GROUPS: 2,
    ApiKey.API_VERSIONS: 2,
    ApiKey.CREATE_TOPICS: 3,
    ApiKey.DELETE_TOPICS: 2,
    ApiKey.DELETE_RECORDS: 1,
    ApiKey.INIT_PRODUCER_ID: 1,
    ApiKey.ADD_PARTITIONS_TO_TXN: 1,
    ApiKey.ADD_OFFSETS_TO_TXN: 1,
    ApiKey.END_TXN: 1,
    ApiKey.TXN_OFFSET_COMMIT: 1,
    ApiKey.DESCRIBE_ACLS: 1,
    ApiKey.CREATE_ACLS: 1,
    ApiKey.DELETE_ACLS: 1,
    ApiKey.DESCRIBE_CONFIGS: 2,
    ApiKey.ALTER_CONFIGS: 1,
    ApiKey.CREATE_PARTITIONS: 1,
    ApiKey.DELETE_GROUPS: 1,
    ApiKey.ELECT_LEADERS: 0,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: 0,
    ApiKey.OFFSET_DELETE: 0,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: 0,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: 0,
}


def client_throttles(api_key: int, version: int) -> bool:
    """Whether a client holds back after this response's throttle time (KIP-219)."""
    since = CLIENT_THROTTLES_SINCE.get(api_key)
    return since is not None and version >= since
