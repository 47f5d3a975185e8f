"""``replica.selector.class`` (KIP-392): how a leader picks the replica a consumer
reads from. Kafka's class names are accepted; what each decides lives in
``epochlog.replication.replica_selector``."""

from __future__ import annotations

from epochlog.settings.registry import Setting, choice

LEADER_SELECTOR = "org.apache.kafka.common.replica.LeaderSelector"
RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"

REPLICA_SELECTOR_SETTINGS = [
    Setting(
        "replica.selector.class",
        choice("", LEADER_SELECTOR, RACK_AWARE_SELECTOR),
        "",
        "Which replica a consumer (Fetch v11+) reads from: empty or LeaderSelector, the "
        "leader; RackAwareReplicaSelector, an in-sync replica in the consumer's client.rack "
        "(the leader if it is there), named in the answer's preferred_read_replica.",
        "Replication",
    ),
]
