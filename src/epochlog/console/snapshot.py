"""What the console shows, read through epochlog's admin client only: the console may run
far from the brokers, so it sees the cluster as any Kafka tool does, never their files.

Each call is bounded: a broker that stopped answering (paused, partitioned) costs one
bound per snapshot and shows as an error, instead of freezing the page."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

from epochlog.client.admin import (
    DEBUGGING_REPLICA_ID,
    EARLIEST,
    LATEST,
    AsyncAdmin,
    ClusterInfo,
    PartitionInfo,
    TopicInfo,
)
from epochlog.client.errors import ClientError, TopicPartition
from epochlog.metastore import configured_uri
from epochlog.protocol.errors import KafkaError
from epochlog.seams import Clock
from epochlog.seams.waiting import with_timeout

T = TypeVar("T")
# How long one request of a snapshot may take before its broker counts as not answering.
REQUEST_BOUND_S = 2.0
INTERNAL_PREFIX = "__"
FAILURES = (KafkaError, ClientError, OSError, TimeoutError, KeyError)
METASTORE_SETTINGS = ["metastore", "zookeeper.connect", "log.dirs", "log.dir"]


class Snapshotter:
    """Takes snapshots, asking first the broker that answered last: ``AsyncAdmin`` would
    otherwise keep asking the first broker it knows, which may be the one that hangs."""

    def __init__(self, admin: AsyncAdmin, clock: Clock) -> None:
        self.admin = admin
        self.clock = clock
        self._preferred: int | None = None
        self._known: list[int] = []  # the brokers of the last answer
        # (topic id, topic, partition) -> the leader epoch whose end is known to the view.
        self._epochs: dict[tuple[str, str, int], int] = {}
        self._metastore: str | None = None

    async def _bounded(self, call: Awaitable[T]) -> T:
        return await with_timeout(self.clock, call, REQUEST_BOUND_S)

    async def _cluster(self) -> ClusterInfo:
        order: list[int | None] = [self._preferred] if self._preferred in self._known else []
        order += [b for b in self._known if b != self._preferred]
        errors = []
        for broker in [*order, None]:  # at last the bootstrap servers
            try:
                cluster = await self._bounded(self.admin.describe_cluster(via=broker))
                self._preferred, self._known = broker, sorted(cluster.brokers)
                return cluster
            except FAILURES as exc:
                asked = "the bootstrap servers" if broker is None else f"broker {broker}"
                errors.append(f"{asked}: {exc or type(exc).__name__}")
        raise ConnectionError("no broker answered Metadata: " + "; ".join(errors))

    async def take(self) -> dict[str, Any]:
        """One JSON-ready view of the cluster: brokers, partitions with offsets, groups."""
        cluster = await self._cluster()
        shown = [
            t
            for t in sorted(cluster.topics.values(), key=lambda t: t.name)
            if not t.name.startswith(INTERNAL_PREFIX)
        ]
        topics = list(await asyncio.gather(*(self._topic(cluster, t) for t in shown)))
        high_watermarks = {
            (t["name"], p["partition"]): p.get("high_watermark")
            for t in topics
            for p in t["partitions"]
        }
        return {
            "time_ms": self.clock.time_ms(),
            "cluster_id": cluster.cluster_id,
            "controller": cluster.controller_id,
            "metastore": await self._metastore_of(cluster),
            "brokers": [
                {"id": b, "host": host, "port": port, "rack": cluster.racks.get(b)}
                for b, (host, port) in sorted(cluster.brokers.items())
            ],
            "topics": topics,
            "groups": await self._groups(high_watermarks),
        }

    async def _metastore_of(self, cluster: ClusterInfo) -> str | None:
        """The metastore the brokers' settings name (DescribeConfigs of the broker that
        answered Metadata), asked until once answered: a running broker keeps its own."""
        if self._metastore is None and cluster.brokers:
            broker = self._preferred if self._preferred in cluster.brokers else min(cluster.brokers)
            try:
                asked = self.admin.describe_broker_configs(broker, METASTORE_SETTINGS)
                settings = await self._bounded(asked)
            except FAILURES:
                return None
            log_dir = (settings.get("log.dirs") or settings.get("log.dir") or "").split(",")[0]
            self._metastore = configured_uri(
                settings.get("metastore") or "",
                settings.get("zookeeper.connect") or "",
                log_dir.strip(),
            )
        return self._metastore

    async def _topic(self, cluster: ClusterInfo, topic: TopicInfo) -> dict[str, Any]:
        partitions = await asyncio.gather(
            *(self._partition(cluster, topic.name, p) for p in topic.partitions)
        )
        for entry in partitions:
            await self._previous_epoch_end(str(topic.topic_id), topic.name, entry)
        return {
            "name": topic.name,
            "topic_id": str(topic.topic_id),
            "error": topic.error,
            "partitions": list(partitions),
        }

    async def _offset(self, broker: int, tp: tuple[str, int], at: int, replica: int) -> int | str:
        try:
            offset, _ = await self._bounded(self.admin.list_offset(broker, *tp, at, replica))
            return offset
        except FAILURES as exc:
            return str(exc) or type(exc).__name__

    async def _partition(self, cluster: ClusterInfo, topic: str, p: PartitionInfo) -> dict:
        tp = (topic, p.partition)
        entry: dict[str, Any] = {
            "partition": p.partition,
            "leader": p.leader,
            "leader_epoch": p.leader_epoch,
            "replicas": p.replicas,
            "isr": p.isr,
            "offline_replicas": p.offline_replicas,
            "error": p.error,
        }
        # Each replica's own log end (Kafka's debugging replica id: never held back).
        live = [r for r in p.replicas if r in cluster.brokers]
        ends = await asyncio.gather(
            *(self._offset(r, tp, LATEST, DEBUGGING_REPLICA_ID) for r in live)
        )
        entry["replica_log_ends"] = {str(r): end for r, end in zip(live, ends, strict=True)}
        if p.leader >= 0:
            entry["high_watermark"], entry["log_start"] = await asyncio.gather(
                self._offset(p.leader, tp, LATEST, -1), self._offset(p.leader, tp, EARLIEST, -1)
            )
            entry["log_end"] = entry["replica_log_ends"].get(str(p.leader))
        return entry

    async def _previous_epoch_end(self, topic_id: str, topic: str, entry: dict) -> None:
        """After a leader change, where the previous epoch ends on the new leader: what
        a replica or an old leader held past it was cut (asked again next time if the
        new leader does not answer yet)."""
        key = (topic_id, topic, entry["partition"])
        last = self._epochs.setdefault(key, entry["leader_epoch"])
        if last == entry["leader_epoch"] or entry["leader"] < 0:
            return
        try:
            _, end = await self._bounded(
                self.admin.epoch_end_offset(entry["leader"], topic, entry["partition"], last)
            )
        except FAILURES:
            return
        entry["previous_epoch_end"] = {"epoch": last, "end_offset": end}
        self._epochs[key] = entry["leader_epoch"]

    async def _groups(self, high_watermarks: dict[tuple[str, int], Any]) -> list[dict] | str:
        try:
            listed = await self._bounded(self.admin.list_groups())
            names = [g.group_id for g in listed]
            described = await self._bounded(self.admin.describe_groups(names)) if names else {}
            committed = await asyncio.gather(
                *(self._bounded(self.admin.list_consumer_group_offsets(n)) for n in names)
            )
        except FAILURES as exc:
            return f"groups not available: {exc or type(exc).__name__}"
        out = []
        for name, offsets in zip(names, committed, strict=True):
            group = described[name]
            out.append(
                {
                    "group_id": name,
                    "state": group.state,
                    "protocol": group.protocol,
                    "members": [
                        {
                            "member_id": m.member_id,
                            "client_id": m.client_id,
                            "client_host": m.client_host,
                            "assignment": [f"{t}-{p}" for t, p in m.assignment],
                        }
                        for m in group.members
                    ],
                    "offsets": [_committed(tp, at, high_watermarks) for tp, at in offsets.items()],
                }
            )
        return out


def _committed(tp: TopicPartition, at: Any, high_watermarks: dict) -> dict[str, Any]:
    """A committed offset with its leader epoch, and its lag behind the high watermark."""
    hw = high_watermarks.get((tp.topic, tp.partition))
    return {
        "topic": tp.topic,
        "partition": tp.partition,
        "offset": at.offset,
        "leader_epoch": at.leader_epoch,
        "lag": hw - at.offset if isinstance(hw, int) else None,
    }
