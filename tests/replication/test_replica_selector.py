"""Kafka's RackAwareReplicaSelector as a pure choice: the leader when the client has no
rack, when the leader shares it, or when no candidate does; else the most caught-up
candidate in the client's rack (by log end, then by the most recent catch-up)."""

from __future__ import annotations

from epochlog.replication.replica_selector import ReplicaView, rack_aware_select

LEADER = ReplicaView(0, "a", 100, 0)


def test_the_leader_is_kept_without_a_client_rack_or_a_follower_in_it() -> None:
    followers = [ReplicaView(1, "b", 100, 0)]
    assert rack_aware_select("", LEADER, followers) == 0
    assert rack_aware_select("z", LEADER, followers) == 0


def test_the_leader_is_kept_when_it_shares_the_clients_rack() -> None:
    assert rack_aware_select("a", LEADER, [ReplicaView(1, "a", 100, 0)]) == 0


def test_the_most_caught_up_follower_in_the_clients_rack_is_chosen() -> None:
    followers = [
        ReplicaView(1, "b", 90, 0),
        ReplicaView(2, "b", 100, 500),
        ReplicaView(3, "b", 100, 20),
        ReplicaView(4, "c", 100, 0),
    ]
    assert rack_aware_select("b", LEADER, followers) == 3
    assert rack_aware_select("c", LEADER, followers) == 4
