"""What a handler may read and call: the parts of a broker a request touches, and no
more. ``Broker`` provides them; handlers are written against this, so a reader (or a
type checker) can follow a request from its handler into replication, the coordinators
and storage without opening the broker."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from epochlog.broker.cluster_link import ClusterLink
    from epochlog.broker.config import BrokerConfig
    from epochlog.broker.dynamic_configs import DynamicBrokerConfigs
    from epochlog.broker.fetch_sessions import FetchSessionCache
    from epochlog.broker.metadata_cache import MetadataCache
    from epochlog.coordinator.coordinator import GroupCoordinator
    from epochlog.metadata.model import BrokerEndpoint, TopicMetadata
    from epochlog.protocol.apis import ApiSpec
    from epochlog.protocol.errors import ErrorCode
    from epochlog.quotas.accounting import QuotaManagers
    from epochlog.quotas.store import QuotaStore
    from epochlog.replication.replica_manager import ReplicaManager
    from epochlog.seams import Seams
    from epochlog.security.acl_store import AclStore
    from epochlog.security.authorizer import Authorizer
    from epochlog.storage.config import LogConfig
    from epochlog.txn.coordinator import TransactionCoordinator
    from epochlog.txn.verification import TransactionVerifier


class ServedApis(Protocol):
    """ApiVersions' view of the request channel."""

    @property
    def apis(self) -> list[ApiSpec]: ...


@runtime_checkable
class HandlerContext(Protocol):
    broker_id: int
    config: BrokerConfig
    # The settings in force: ``config``'s with the dynamic ones over them.
    dynamic_configs: DynamicBrokerConfigs
    seams: Seams
    endpoint: BrokerEndpoint | None
    metadata_cache: MetadataCache
    replica_manager: ReplicaManager
    fetch_sessions: FetchSessionCache
    coordinator: GroupCoordinator
    txn_coordinator: TransactionCoordinator
    # KIP-890: a Produce's transactional batches checked with their coordinator.
    txn_verifier: TransactionVerifier
    cluster: ClusterLink | None
    request_channel: ServedApis
    # None when authorizer.class.name is empty: every request is allowed.
    authorizer: Authorizer | None
    acl_store: AclStore | None
    # Client quotas: the managers every request is charged to, and their metastore side.
    quotas: QuotaManagers
    quota_store: QuotaStore | None

    async def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: dict[str, str],
        assignment: dict[int, list[int]] | None = None,
        validate_only: bool = False,
        timeout_s: float = 30.0,
    ) -> TopicMetadata | None: ...

    async def auto_create_topic(
        self, name: str, allowed: bool
    ) -> tuple[TopicMetadata | None, ErrorCode]: ...

    def validate_topic_configs(self, configs: dict[str, str]) -> None: ...

    def validate_assignments(self, assignments: dict[int, list[int]]) -> None: ...

    def topic_log_config(self, configs: dict[str, str]) -> LogConfig: ...
