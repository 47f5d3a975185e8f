"""The broker's Prometheus collector: every gauge is read from the broker's own state
when Prometheus scrapes (partitions, logs, quarantine, the controller, groups), and the
counters its components keep where their events happen (appends and consumer fetches
per topic, ISR changes, truncations, elections, expired offsets) are rendered here
under Kafka's names as the JMX exporter writes them. Request metrics are counted by
the request channel (``metrics/requests.py``) on the same registry."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
    SummaryMetricFamily,
)
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from epochlog.broker.cluster_link import ClusterLink
    from epochlog.broker.metadata_cache import MetadataCache
    from epochlog.controller.controller import Controller
    from epochlog.coordinator.coordinator import GroupCoordinator
    from epochlog.replication.partition import Partition
    from epochlog.replication.replica_manager import ReplicaManager

PARTITION_LABELS = ["topic", "partition"]


class BrokerCollector(Collector):
    """Reads one broker's parts at each scrape; ``cluster``, ``controller`` and
    ``connections`` are asked then, since the first two exist only once the broker
    has started."""

    def __init__(
        self,
        replica_manager: ReplicaManager,
        coordinator: GroupCoordinator,
        metadata_cache: MetadataCache,
        cluster: Callable[[], ClusterLink | None],
        controller: Callable[[], Controller | None],
        connections: Callable[[], int],
    ) -> None:
        self._replicas = replica_manager
        self._coordinator = coordinator
        self._metadata = metadata_cache
        self._cluster = cluster
        self._controller = controller
        self._connections = connections

    def collect(self) -> Iterator[Metric]:
        partitions = sorted(self._replicas.partitions(), key=lambda p: (p.topic, p.index))
        yield from self._replica_manager(partitions)
        yield from self._topics()
        yield from self._logs(partitions)
        yield from self._controller_metrics()
        cluster = self._cluster()
        yield CounterMetricFamily(
            "epochlog_stale_metadata_refusals",
            "Topic states this broker refused for an older controller epoch than one it "
            "has seen (written by a deposed controller).",
            value=cluster.stale_states_refused if cluster else 0,
        )
        yield GaugeMetricFamily(
            "kafka_server_socketservermetrics_connection_count",
            "Open client and replica connections to the Kafka listener.",
            value=self._connections(),
        )
        yield from self._groups(partitions)

    def _replica_manager(self, partitions: list[Partition]) -> Iterator[Metric]:
        led = [p for p in partitions if p.is_leader]
        yield _gauge("partitioncount", "Partitions with a replica on this broker.", len(partitions))
        yield _gauge("leadercount", "Partitions this broker leads.", len(led))
        under = sum(1 for p in led if len(p.state.isr) < len(p.state.replicas))
        yield _gauge(
            "underreplicatedpartitions",
            "Partitions this broker leads whose ISR is smaller than their replica set.",
            under,
        )
        for name, what, value in (
            ("isrshrinks", "ISR shrinks the controller accepted", self._replicas.isr_shrinks),
            ("isrexpands", "ISR expansions the controller accepted", self._replicas.isr_expands),
        ):
            yield CounterMetricFamily(
                f"kafka_server_replicamanager_{name}",
                f"{what} for partitions this broker leads.",
                value=value,
            )

    def _topics(self) -> Iterator[Metric]:
        stats = self._replicas.topic_stats
        kafka = "kafka_server_brokertopicmetrics_"
        for name, what, counts in (
            (f"{kafka}messagesin", "Records appended as leader", stats.messages_in),
            (f"{kafka}bytesin", "Bytes appended as leader", stats.bytes_in),
            (f"{kafka}bytesout", "Record bytes sent to consumers (not replicas)", stats.bytes_out),
            (  # Kafka has no such metric, hence epochlog's name.
                "epochlog_topic_messages_out",
                "Offsets sent to consumers (not replicas) from their fetch offsets on",
                stats.messages_out,
            ),
        ):
            family = CounterMetricFamily(name, f"{what}, by topic.", labels=["topic"])
            for topic in sorted(counts):
                family.add_metric([topic], counts[topic])
            yield family

    def _logs(self, partitions: list[Partition]) -> Iterator[Metric]:
        families = {
            "size": GaugeMetricFamily(
                "kafka_log_log_size", "Bytes of the partition's log.", labels=PARTITION_LABELS
            ),
            "end": GaugeMetricFamily(
                "kafka_log_log_logendoffset", "The log end offset.", labels=PARTITION_LABELS
            ),
            "start": GaugeMetricFamily(
                "kafka_log_log_logstartoffset", "The log start offset.", labels=PARTITION_LABELS
            ),
            "epoch": GaugeMetricFamily(
                "epochlog_partition_leader_epoch",
                "The partition's leader epoch as this replica knows it.",
                labels=PARTITION_LABELS,
            ),
            "quarantine": GaugeMetricFamily(
                "epochlog_quarantine_size_bytes",
                "Bytes truncations and recoveries moved into the partition's quarantine.",
                labels=PARTITION_LABELS,
            ),
            "holes": GaugeMetricFamily(
                "epochlog_log_hole_offsets",
                "Offsets this replica lacks below its log end (damage), by whether a replica "
                "may still fill them (awaiting_repair) or none can (lost).",
                labels=[*PARTITION_LABELS, "state"],
            ),
            "truncations": CounterMetricFamily(
                "epochlog_log_truncations",
                "Truncations of this replica's log (divergence from its leader, out of range).",
                labels=PARTITION_LABELS,
            ),
            "records": CounterMetricFamily(
                "epochlog_log_truncated_records",
                "Offsets those truncations removed (into quarantine).",
                labels=PARTITION_LABELS,
            ),
            "bytes": CounterMetricFamily(
                "epochlog_log_truncated_bytes",
                "Bytes those truncations removed (into quarantine).",
                labels=PARTITION_LABELS,
            ),
        }
        for p in partitions:
            labels = [p.topic, str(p.index)]
            log = p.log
            for key, value in (
                ("size", log.size_bytes),
                ("end", log.log_end_offset),
                ("start", log.log_start_offset),
                ("epoch", p.leader_epoch),
                ("quarantine", log.quarantine.size_bytes()),
                ("truncations", p.truncations),
                ("records", p.truncated_records),
                ("bytes", p.truncated_bytes),
            ):
                families[key].add_metric(labels, value)
            holes = list(log.holes)
            for state, lost in (("awaiting_repair", False), ("lost", True)):
                count = sum(h.end_offset - h.first_offset for h in holes if h.lost == lost)
                families["holes"].add_metric([*labels, state], count)
        yield from families.values()

    def _controller_metrics(self) -> Iterator[Metric]:
        controller = self._controller()
        active = controller is not None and controller.active
        offline = 0
        if active:
            offline = sum(
                1
                for topic in self._metadata.topics()
                for state in topic.partitions.values()
                if state.leader < 0
            )
        yield GaugeMetricFamily(
            "kafka_controller_kafkacontroller_activecontrollercount",
            "1 on the broker that is the controller.",
            value=int(active),
        )
        yield GaugeMetricFamily(
            "kafka_controller_kafkacontroller_offlinepartitionscount",
            "Partitions without a leader (reported by the controller only).",
            value=offline,
        )
        elections = controller.leader_elections if controller else 0
        elapsed_ms = controller.leader_election_ms if controller else 0.0
        yield SummaryMetricFamily(
            "kafka_controller_controllerstats_leaderelectionrateandtimems",
            "Leader elections this broker wrote as controller, and the milliseconds from "
            "the start of their controller pass to their write.",
            count_value=elections,
            sum_value=elapsed_ms,
        )
        yield CounterMetricFamily(
            "kafka_controller_controllerstats_uncleanleaderelections",
            "Unclean leader elections this broker wrote as controller.",
            value=controller.unclean_leader_elections if controller else 0,
        )

    def _groups(self, partitions: list[Partition]) -> Iterator[Metric]:
        states = GaugeMetricFamily(
            "epochlog_group_state",
            "1 for the state each group this broker coordinates is in.",
            labels=["group", "state"],
        )
        members = GaugeMetricFamily(
            "epochlog_group_members", "Members of each group.", labels=["group"]
        )
        lag = GaugeMetricFamily(
            "epochlog_group_committed_offset_lag",
            "High watermark minus the committed offset, for partitions with a replica on "
            "the coordinator (its high watermark as that replica knows it).",
            labels=["group", "topic", "partition"],
        )
        high_watermarks = {(p.topic, p.index): p.high_watermark for p in partitions}
        groups = sorted(self._coordinator.registry.owned_groups(), key=lambda g: g.group_id)
        for group in groups:
            states.add_metric([group.group_id, group.state.value], 1)
            members.add_metric([group.group_id], len(group.members))
            for (topic, index), committed in sorted(group.offsets.items()):
                high_watermark = high_watermarks.get((topic, index))
                if high_watermark is not None:
                    lag.add_metric(
                        [group.group_id, topic, str(index)],
                        max(0, high_watermark - committed.offset),
                    )
        yield states
        yield members
        yield lag
        yield CounterMetricFamily(
            "epochlog_group_offsets_expired",
            "Committed offsets expired under KIP-211's rules.",
            value=self._coordinator.offsets.expired,
        )


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(f"kafka_server_replicamanager_{name}", documentation, value=value)
