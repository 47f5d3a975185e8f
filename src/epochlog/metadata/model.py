"""What the cluster is made of, as every part of epochlog sees it: brokers, topics and
each partition's state (leader, leader epoch, replicas, ISR). The controller decides
these, the metastore keeps them (``layout.py``), brokers cache and act on them; this
module sits below all of them and imports none.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Collection
from dataclasses import dataclass, field

# Planted bug (c) of the simulator's tests (never set elsewhere): offline replicas may
# join the ISR, and the controller reconciles the ISR only when its offline set changes.
_PLANTED_OFFLINE_JOINS_ISR = False


@dataclass
class PartitionState:
    """What the controller decided for a partition."""

    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    offline_replicas: list[int] = field(default_factory=list)
    # Set when the leader came from outside the ISR: its log may lack acknowledged data.
    elected_uncleanly: bool = False
    # Bumped by the controller at every change of this partition's state; ISR proposals
    # carry it so that the controller can refuse one made from a stale state.
    partition_epoch: int = 0
    # KIP-455: while a reassignment runs, ``replicas`` is the target followed by the
    # original replicas that leave; these name the ones joining and the ones leaving.
    adding_replicas: list[int] = field(default_factory=list)
    removing_replicas: list[int] = field(default_factory=list)

    @property
    def reassigning(self) -> bool:
        return bool(self.adding_replicas or self.removing_replicas)

    @property
    def target_replicas(self) -> list[int]:
        return [r for r in self.replicas if r not in self.removing_replicas]

    @property
    def original_replicas(self) -> list[int]:
        return [r for r in self.replicas if r not in self.adding_replicas]

    @property
    def version(self) -> tuple[int, int]:
        return self.leader_epoch, self.partition_epoch

    def may_join_isr(self, replica: int, live: Collection[int] | None = None) -> bool:
        """KIP-320: a replica the controller marks offline (or, given the controller's
        ``live`` brokers, one not among them) never joins the ISR, even if it fetches (a
        zombie cut from the metastore would count for min.insync.replicas without being
        electable). The leader asks before proposing, the controller before accepting."""
        if _PLANTED_OFFLINE_JOINS_ISR:
            return replica in self.replicas
        return (
            replica in self.replicas
            and replica not in self.offline_replicas
            and (live is None or replica in live)
        )


INTERNAL_TOPICS = frozenset({"__consumer_offsets"})
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")


def topic_name_error(name: str) -> str | None:
    """Kafka's rule for topic names, or None if the name is legal."""
    if name in (".", ".."):
        return f"topic name {name!r} is illegal"
    if not _LEGAL_TOPIC.match(name):
        return (
            f"topic name {name!r} is illegal: up to 249 characters of ASCII alphanumerics,"
            " '.', '_' and '-'"
        )
    return None


@dataclass(frozen=True)
class BrokerEndpoint:
    """A live broker: ``host``/``port`` are its inter-broker listener's; ``listeners``
    every advertised listener as (name, host, port), for clients on each listener."""

    node_id: int
    host: str
    port: int
    rack: str | None = None
    listeners: tuple[tuple[str, str, int], ...] = ()

    def on(self, listener: str) -> BrokerEndpoint | None:
        """This broker as seen on ``listener`` (Kafka answers a request with the
        endpoints of the listener it arrived on); None when it has no such listener.
        A registration without listeners (written before them) is its one endpoint."""
        if not self.listeners:
            return self
        for name, host, port in self.listeners:
            if name == listener:
                return BrokerEndpoint(self.node_id, host, port, self.rack, self.listeners)
        return None


@dataclass
class TopicMetadata:
    name: str
    topic_id: uuid.UUID
    partitions: dict[int, PartitionState]
    configs: dict[str, str] = field(default_factory=dict)

    @property
    def is_internal(self) -> bool:
        return self.name in INTERNAL_TOPICS
