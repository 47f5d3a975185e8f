"""KIP-392, the leader's side: which replica a consumer should read a partition from.

Kafka's ``ReplicaManager.findPreferredReadReplica`` with its two selectors: the leader
offers only followers in the ISR that hold the fetch offset (between their log start and
log end) and that the client can reach; ``RackAwareReplicaSelector`` picks among those in
the client's rack the most caught-up one (by log end, then by the most recent catch-up),
unless the leader is in that rack too; ``LeaderSelector`` (or none) keeps the leader.
Pure: the fetch handler passes the partition, the racks of reachable brokers and the
time."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from epochlog.replication.partition import Partition
from epochlog.settings.replica_selector import RACK_AWARE_SELECTOR


@dataclass(frozen=True)
class ReplicaView:
    """A replica as a selector sees it (Kafka's ReplicaView)."""

    broker_id: int
    rack: str | None
    log_end_offset: int
    time_since_caught_up_ms: int


def rack_aware_select(client_rack: str, leader: ReplicaView, followers: list[ReplicaView]) -> int:
    """Kafka's RackAwareReplicaSelector: the broker id to read from."""
    if not client_rack:
        return leader.broker_id
    in_rack = [r for r in followers if r.rack == client_rack]
    if leader.rack == client_rack or not in_rack:
        return leader.broker_id
    best = max(in_rack, key=lambda r: (r.log_end_offset, -r.time_since_caught_up_ms))
    return best.broker_id


def preferred_read_replica(
    selector: str,
    partition: Partition,
    client_rack: str,
    fetch_offset: int,
    racks: Mapping[int, str | None],
    now_ms: int,
) -> int | None:
    """The follower a consumer fetching ``fetch_offset`` on this leader is sent to, or
    None to read from the leader. ``racks``: every broker the client can reach."""
    if selector != RACK_AWARE_SELECTOR or not client_rack or not partition.is_leader:
        return None
    me = partition.local_broker_id
    if me not in racks:
        return None
    followers = [
        ReplicaView(f.broker_id, racks[f.broker_id], f.log_end_offset, now_ms - f.last_caught_up_ms)
        for f in partition.followers.values()
        if f.broker_id in partition.state.isr
        and f.broker_id in racks
        and f.log_start_offset <= fetch_offset <= f.log_end_offset
    ]
    leader = ReplicaView(me, racks[me], partition.log_end_offset, 0)
    chosen = rack_aware_select(client_rack, leader, followers)
    return None if chosen == me else chosen
