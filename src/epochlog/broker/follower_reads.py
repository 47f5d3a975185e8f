"""KIP-392 in the Fetch handler: a consumer's Fetch from v11 (which carries its
``client.rack``) may read a follower, up to that follower's high watermark and after the
same KIP-320 epoch checks as on the leader; the leader, when ``replica.selector.class``
picks another in-sync replica, answers with no records and that replica's id in
``preferred_read_replica``. Followers' and older consumers' fetches stay on the leader."""

from __future__ import annotations

from typing import TYPE_CHECKING

from epochlog.broker.responses import endpoints_on_listener
from epochlog.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from epochlog.broker.handlers.context import HandlerContext
    from epochlog.replication.partition import Partition

# Fetch v11 added rack_id and preferred_read_replica (and Kafka's ClientMetadata).
FOLLOWER_FETCH_VERSION = 11
NO_REPLICA = -1


class FollowerReads:
    """One Fetch request's side of KIP-392."""

    def __init__(
        self,
        broker: HandlerContext,
        listener: str,
        replica_id: int,
        version: int,
        rack_id: str | None,
    ) -> None:
        self._broker = broker
        self._listener = listener
        # Kafka's fetchOnlyLeader: a follower's fetch, or a consumer's without client
        # metadata (before v11), must reach the leader.
        self.allowed = replica_id < 0 and version >= FOLLOWER_FETCH_VERSION
        self._rack = (rack_id or "") if self.allowed else ""
        self._racks: dict[int, str | None] | None = None

    def require_leader(self, partition: Partition) -> bool:
        """Whether the epoch check must also find this broker leading (a resigning
        leader is never read as if it were a follower)."""
        return partition.is_leader or not self.allowed

    def preferred(self, partition: Partition, fetch_offset: int) -> int:
        """The replica the client should read from instead of this leader, or -1."""
        if not self._rack or not partition.is_leader:
            return NO_REPLICA
        if self._racks is None:
            # The brokers the client can reach on its listener, as Metadata names them.
            reachable = endpoints_on_listener(self._broker, self._listener)
            self._racks = {e.node_id: e.rack for e in reachable}
        chosen = self._broker.replica_manager.preferred_read_replica(
            partition, self._rack, fetch_offset, self._racks
        )
        return NO_REPLICA if chosen is None else chosen


def not_hosted_error(
    broker: HandlerContext, topic: str, index: int, raised: ErrorCode
) -> ErrorCode:
    """Kafka's answer for a partition this broker serves no replica of, ``raised`` by
    the replica manager: an offline replica (its log dir failed) says so,
    KAFKA_STORAGE_ERROR; one the cluster has elsewhere (metadata or a preferred read
    replica that moved away sent the client here) NOT_LEADER_OR_FOLLOWER, and the
    client asks again; else UNKNOWN_TOPIC_OR_PARTITION."""
    if raised == ErrorCode.KAFKA_STORAGE_ERROR:
        return raised
    meta = broker.metadata_cache.topic(topic)
    if meta is not None and index in meta.partitions:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
