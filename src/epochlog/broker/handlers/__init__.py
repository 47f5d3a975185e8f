"""One module per Kafka API; each declares the versions it serves (``API``) and exposes
``async handle(broker, request, version, frame, session)`` returning a response message, a
RawResponse, or None when no answer is due. The handler table below is what the broker
serves and what ApiVersions advertises."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from epochlog.broker.handlers import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    alter_client_quotas,
    alter_configs,
    alter_partition_reassignments,
    alter_replica_log_dirs,
    alter_user_scram_credentials,
    api_versions,
    create_acls,
    create_partitions,
    create_topics,
    delete_acls,
    delete_groups,
    delete_records,
    delete_topics,
    describe_acls,
    describe_client_quotas,
    describe_cluster,
    describe_configs,
    describe_groups,
    describe_log_dirs,
    describe_producers,
    describe_transactions,
    describe_user_scram_credentials,
    elect_leaders,
    end_txn,
    fetch,
    find_coordinator,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    join_group,
    leave_group,
    list_groups,
    list_offsets,
    list_partition_reassignments,
    list_transactions,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    offset_for_leader_epoch,
    produce,
    sasl_authenticate,
    sasl_handshake,
    sync_group,
    txn_offset_commit,
    write_txn_markers,
)
from epochlog.broker.handlers.context import HandlerContext
from epochlog.protocol.apis import ApiSpec, RequestFrame
from epochlog.security.session import Session

Handle = Callable[[HandlerContext, Any, int, RequestFrame, Session], Awaitable[Any]]

MODULES = (
    produce,
    fetch,
    list_offsets,
    metadata,
    api_versions,
    create_topics,
    delete_topics,
    delete_records,
    create_partitions,
    describe_configs,
    alter_configs,
    incremental_alter_configs,
    describe_cluster,
    elect_leaders,
    alter_partition_reassignments,
    list_partition_reassignments,
    # Log dirs (kafka-log-dirs.sh, moves between the dirs of one broker).
    describe_log_dirs,
    alter_replica_log_dirs,
    init_producer_id,
    offset_for_leader_epoch,
    # The group coordinator: Kafka 3.1's versions, coherent with Fetch v13 (kafka-python
    # infers the broker version from the table) and below what would need KIP-848.
    offset_commit,
    offset_fetch,
    find_coordinator,
    join_group,
    heartbeat,
    leave_group,
    sync_group,
    describe_groups,
    list_groups,
    delete_groups,
    offset_delete,
    # The transaction coordinator: Kafka 3.1's versions, before KIP-890's
    # per-transaction epoch bumps (EndTxn v5) and server-side verification.
    add_partitions_to_txn,
    add_offsets_to_txn,
    end_txn,
    write_txn_markers,
    txn_offset_commit,
    describe_producers,
    describe_transactions,
    list_transactions,
    # SASL (KIP-152, KIP-368) and SCRAM users (KIP-554).
    sasl_handshake,
    sasl_authenticate,
    describe_user_scram_credentials,
    alter_user_scram_credentials,
    # ACLs: Kafka 2.x's versions, which librdkafka and kafka-python send.
    describe_acls,
    create_acls,
    delete_acls,
    # Client quotas (KIP-546): Kafka 2.6+'s versions, which kafka-python 3.0 sends.
    describe_client_quotas,
    alter_client_quotas,
)


@dataclass(frozen=True)
class Handler:
    api: ApiSpec
    handle: Handle


# What the broker serves, and so what ApiVersions advertises: nothing else.
HANDLERS: dict[int, Handler] = {m.API.key: Handler(m.API, m.handle) for m in MODULES}
SUPPORTED: dict[int, ApiSpec] = {key: h.api for key, h in HANDLERS.items()}
