"""KIP-320's TLA+ model invariants (hachikuji/kafka-specification, KafkaReplication.tla
and Kip320.tla), judged on snapshots of a simulated cluster taken between steps.

The simulation is one thread, so a snapshot is exact: every live broker's view of each
partition and the metastore's record of it at one virtual instant. Two logs are compared
by their leader-epoch caches, as the model compares records: one leader writes each
epoch and followers copy its records, so two logs hold the same records below an offset
when both reach it and each offset below it lies in the same epoch on both (KIP-101).

Judged on replicas that are *present*: alive, and taken in by the controller in their
current incarnation (``/brokers/epochs`` holds their session). A broker restarted after a
crash may have lost unsynced records its ISR counted on; until the controller has
handled it as lost and joined again, it is not the replica the ISR names (the model has
no crashes). A paused broker is present: it is exactly the zombie the model is about.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from epochlog.metadata import layout
from epochlog.metadata.layout import TopicNode
from epochlog.metadata.model import PartitionState
from epochlog.metastore.api import WatchEvent
from epochlog.metastore.memory import MemoryMetastore, MemoryStore, memory_store
from epochlog.sim.cluster import SimCluster


@dataclass(frozen=True)
class ReplicaView:
    """One live broker's state of one partition."""

    broker: int
    present: bool
    leads: bool  # presumes leadership (ReplicaPresumesLeadership)
    leader_epoch: int
    isr: tuple[int, ...]  # its own view of the ISR
    high_watermark: int
    log_start: int
    log_end: int
    epochs: tuple[tuple[int, int], ...]  # (epoch, start offset) of its epoch cache


@dataclass(frozen=True)
class PartitionView:
    name: str  # topic-index
    quorum: PartitionState  # what the metastore records (quorumState)
    replicas: tuple[ReplicaView, ...]


def snapshot(cluster: SimCluster) -> list[PartitionView]:
    """Every partition's state, as the metastore and each live broker hold it now."""
    store = memory_store(cluster.metastore.removeprefix("memory://"))
    epochs_node = store.nodes.get(layout.BROKER_EPOCHS)
    taken_in = {
        int(b): int(e) for b, e in json.loads(epochs_node.data if epochs_node else b"{}").items()
    }
    views = []
    for path in sorted(p for p in store.nodes if p.startswith(layout.TOPICS + "/")):
        topic = TopicNode.decode(path.rsplit("/", 1)[1], store.nodes[path].data).topic
        for index, quorum in sorted(topic.partitions.items()):
            views.append(
                PartitionView(
                    f"{topic.name}-{index}",
                    quorum,
                    tuple(_replicas(cluster, taken_in, topic.name, index)),
                )
            )
    return views


def _replicas(
    cluster: SimCluster, taken_in: dict[int, int], topic: str, index: int
) -> list[ReplicaView]:
    replicas = []
    for broker in cluster.brokers:
        if broker is None or not isinstance(broker.store, MemoryMetastore):
            continue
        hosted = {(p.topic, p.index): p for p in broker.replica_manager.partitions()}
        p = hosted.get((topic, index))
        if p is None:
            continue
        present = taken_in.get(broker.broker_id) == broker.store.session_id
        replicas.append(
            ReplicaView(
                broker.broker_id,
                present,
                p.is_leader,
                p.leader_epoch,
                tuple(p.state.isr),
                p.high_watermark,
                p.log.log_start_offset,
                p.log.log_end_offset,
                tuple(p.log.epoch_cache.entries()),
            )
        )
    return replicas


def same_log_below(a: ReplicaView, b: ReplicaView, offset: int) -> bool:
    """``a`` and ``b`` hold the same records below ``offset`` (from where both start)."""
    if a.log_end < offset or b.log_end < offset:
        return False
    low = max(a.log_start, b.log_start)
    starts = {low} | {s for _, s in a.epochs + b.epochs if low < s < offset}
    return all(_epoch_at(a, s) == _epoch_at(b, s) for s in starts if s < offset)


def _epoch_at(replica: ReplicaView, offset: int) -> int:
    epoch = -1
    for e, start in replica.epochs:
        if start > offset:
            break
        epoch = e
    return epoch


def leader_in_isr(views: Sequence[PartitionView]) -> list[str]:
    """LeaderInIsr: the leader the metastore records is in the ISR it records, and so is
    a broker acting as leader in the recorded epoch; not judged after an unclean
    election (its leader came from outside the ISR by definition)."""
    problems = []
    for v in views:
        q = v.quorum
        if q.elected_uncleanly or q.leader < 0:
            continue
        if q.leader not in q.isr:
            problems.append(f"{v.name}: leader {q.leader} (epoch {q.leader_epoch}) not in {q.isr}")
        for r in v.replicas:
            if r.leads and r.leader_epoch == q.leader_epoch and r.broker not in q.isr:
                problems.append(
                    f"{v.name}: b{r.broker} leads in epoch {r.leader_epoch}, ISR is {q.isr}"
                )
    return problems


def weak_isr(views: Sequence[PartitionView]) -> list[str]:
    """WeakIsr: every present broker acting as leader (in any epoch: a zombie too) and
    every present member of the ISR *it* believes in hold the same records below its
    high watermark."""
    return [
        f"{v.name}: b{leader.broker} (epoch {leader.leader_epoch}, HW {leader.high_watermark})"
        f" and b{r.broker} in its ISR {list(leader.isr)} differ below the HW"
        for v in views
        for leader in v.replicas
        if leader.leads and leader.present
        for r in v.replicas
        if r is not leader and r.present and r.broker in leader.isr
        if not same_log_below(leader, r, leader.high_watermark)
    ]


def strong_isr(views: Sequence[PartitionView]) -> list[str]:
    """StrongIsr, for the true leader (the one the metastore records, acting in the
    recorded epoch): every present member of the *recorded* ISR holds the records below
    its high watermark, so whoever is elected next serves what consumers were shown."""
    return [
        f"{v.name}: b{leader.broker} (epoch {leader.leader_epoch}, HW {leader.high_watermark})"
        f" and b{r.broker} in the recorded ISR {v.quorum.isr} differ below the HW"
        for v in views
        for leader in v.replicas
        if leader.leads and leader.present and leader.broker == v.quorum.leader
        if leader.leader_epoch == v.quorum.leader_epoch
        for r in v.replicas
        if r is not leader and r.present and r.broker in v.quorum.isr
        if not same_log_below(leader, r, leader.high_watermark)
    ]


def offline_never_joins_isr(
    before: Sequence[PartitionView], views: Sequence[PartitionView]
) -> list[str]:
    """OfflineNeverJoinsIsr (KIP-320): a replica that joined the recorded ISR since the
    last snapshot is not listed offline in the state that took it in. (A lone ISR
    member that died may stay in the ISR it was last in, as in the model and Kafka:
    that is no joining; one back online is no longer listed.)"""
    previous = {v.name: v.quorum for v in before}
    problems = []
    for v in views:
        old = previous.get(v.name)
        if old is None:
            continue
        for r in sorted(set(v.quorum.isr) - set(old.isr)):
            if r in v.quorum.offline_replicas:
                problems.append(f"{v.name}: b{r} joined the ISR {v.quorum.isr} while offline")
    return problems


class IsrWriteWatch:
    """OfflineNeverJoinsIsr judged on every write of a topic's partition states, as the
    metastore commits it (``MemoryStore.write_observers``): a leader and a controller
    that took an offline replica in and out again within one virtual instant would
    never be seen by a snapshot."""

    def __init__(self, store: MemoryStore, report: Callable[[str], None]) -> None:
        self._store = store
        self._report = report
        self._last: dict[str, PartitionView] = {}

    def __call__(self, events: list[WatchEvent]) -> None:
        for path in sorted({e.path for e in events if e.path.startswith(layout.TOPICS + "/")}):
            node = self._store.nodes.get(path)
            if node is None:
                continue
            topic = TopicNode.decode(path.rsplit("/", 1)[1], node.data).topic
            views = [
                PartitionView(f"{topic.name}-{index}", quorum, ())
                for index, quorum in sorted(topic.partitions.items())
            ]
            before = [self._last[v.name] for v in views if v.name in self._last]
            for problem in offline_never_joins_isr(before, views):
                self._report(problem)
            self._last.update((v.name, v) for v in views)


SNAPSHOT_CHECKERS = {
    "LeaderInIsr": leader_in_isr,
    "WeakIsr": weak_isr,
    "StrongIsr": strong_isr,
}
