"""Where cluster state lives in the metastore, and how each node's data is encoded.

The tree follows Kafka's ZooKeeper layout where Kafka has one:

    /cluster/id                        the cluster id
    /controller                        ephemeral: {"brokerid": N} of the active controller
    /controller_epoch                  the controller epoch; every controller write checks
                                       this node's version, so a deposed controller's
                                       writes fail
    /brokers/ids/<id>                  ephemeral: a live broker's endpoint; the session
                                       that owns it is the broker's epoch (KIP-380's role)
    /brokers/epochs                    {id: broker epoch} of every broker incarnation the
                                       controller has taken in: a broker leads nothing
                                       until its current epoch is there
    /brokers/topics/<name>             topic id, configs and every partition's state
                                       (leader, leader epoch, replicas, ISR, ...)
    /admin/delete_topics/<name>        a request to delete a topic
    /admin/controlled_shutdown/<id>    ephemeral: broker <id> is stopping
    /admin/preferred_replica_election  a request to move leaders back to preferred replicas
    /admin/reassign_partitions/<seq>   a request to reassign one partition (KIP-455; the
                                       reassignment itself lives in the partition's
                                       state: adding_replicas, removing_replicas)
    /isr_change/<seq>                  a leader's proposal to change one partition's ISR
    /latest_producer_id_block          the last producer id handed out
    /kafka-acl, /kafka-acl-extended    ACLs, one node per resource pattern (their layout
                                       and encoding: epochlog.security.acl_store)
    /config/users/<user>               a user's entity config: SCRAM credentials
                                       (epochlog.security.scram_credentials) and quotas
    /config/users/<user>/clients/<id>  quotas of one client id of one user
    /config/clients/<id>               quotas of a client id (epochlog.quotas.store)
    /config/brokers/<id>               dynamic settings of broker <id>, and in
    /config/brokers/<default>          the cluster-wide default ones
                                       (epochlog.broker.dynamic_configs)

Entity config nodes hold Kafka's ``{"version":1,"config":{KEY: "VALUE"}}``; their names
are Kafka's sanitized names (``sanitize``), ``<default>`` standing for the default
entity of its type.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import asdict, dataclass
from urllib.parse import quote, unquote_plus

from epochlog.metadata.model import BrokerEndpoint, PartitionState, TopicMetadata

CLUSTER_ID = "/cluster/id"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
BROKER_IDS = "/brokers/ids"
BROKER_EPOCHS = "/brokers/epochs"
TOPICS = "/brokers/topics"
DELETE_TOPICS = "/admin/delete_topics"
CONTROLLED_SHUTDOWN = "/admin/controlled_shutdown"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
ISR_CHANGE = "/isr_change"
PRODUCER_ID_BLOCK = "/latest_producer_id_block"
# Entity configs (Kafka's /config/<type>/<name>): SCRAM credentials and quotas of users,
# quotas of client ids.
CONFIG_USERS = "/config/users"
# Dynamic broker settings, per broker id and the cluster-wide default.
CONFIG_BROKERS = "/config/brokers"
CONFIG_CLIENTS = "/config/clients"
# The node name of an entity type's default (Kafka's ZooKeeperInternals.DEFAULT_STRING).
DEFAULT_ENTITY = "<default>"

PERSISTENT_PATHS = (
    BROKER_IDS,
    BROKER_EPOCHS,
    TOPICS,
    DELETE_TOPICS,
    CONTROLLED_SHUTDOWN,
    ISR_CHANGE,
    REASSIGN_PARTITIONS,
)


def sanitize(name: str) -> str:
    """Kafka's Sanitizer.sanitize: a user or client id as a node name (Java's URLEncoder,
    with ``*`` as %2A and a space as %20), so ``/`` and ``<default>`` cannot be taken for
    structure or for the default."""
    return quote(name, safe="-._*").replace("*", "%2A").replace("~", "%7E")


def desanitize(node_name: str) -> str:
    """Kafka's Sanitizer.desanitize (Java's URLDecoder)."""
    return unquote_plus(node_name)


def encode_entity_config(config: dict[str, str]) -> bytes:
    return encode_json({"version": 1, "config": dict(sorted(config.items()))})


def decode_entity_config(data: bytes) -> dict[str, str]:
    """An entity config node's entries (an empty node, a folder, holds none)."""
    if not data:
        return {}
    return {str(k): str(v) for k, v in json.loads(data).get("config", {}).items()}


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(name: str) -> str:
    return f"{TOPICS}/{name}"


def encode_broker_epochs(epochs: dict[int, int]) -> bytes:
    return encode_json({str(broker): epoch for broker, epoch in epochs.items()})


def decode_broker_epochs(data: bytes) -> dict[int, int]:
    return {int(broker): int(epoch) for broker, epoch in json.loads(data or b"{}").items()}


def encode_json(value: object) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def encode_broker(endpoint: BrokerEndpoint) -> bytes:
    """Kafka's registration: host and port, plus every listener as ``NAME://HOST:PORT``."""
    return encode_json(
        {
            "host": endpoint.host,
            "port": endpoint.port,
            "rack": endpoint.rack,
            "endpoints": [f"{name}://{host}:{port}" for name, host, port in endpoint.listeners],
        }
    )


def _listener(spec: str) -> tuple[str, str, int]:
    name, _, address = spec.partition("://")
    host, _, port = address.rpartition(":")
    return name, host.strip("[]"), int(port)


def decode_broker(broker_id: int, data: bytes) -> BrokerEndpoint:
    fields = json.loads(data)
    return BrokerEndpoint(
        broker_id,
        fields["host"],
        int(fields["port"]),
        fields.get("rack"),
        tuple(_listener(spec) for spec in fields.get("endpoints", [])),
    )


@dataclass
class TopicNode:
    """A topic as stored: its metadata plus the epoch of the controller that wrote it."""

    topic: TopicMetadata
    controller_epoch: int

    def encode(self) -> bytes:
        return encode_json(
            {
                "topic_id": str(self.topic.topic_id),
                "configs": self.topic.configs,
                "controller_epoch": self.controller_epoch,
                "partitions": {
                    str(index): asdict(state) for index, state in self.topic.partitions.items()
                },
            }
        )

    @classmethod
    def decode(cls, name: str, data: bytes) -> TopicNode:
        fields = json.loads(data)
        partitions = {
            int(index): PartitionState(**state) for index, state in fields["partitions"].items()
        }
        topic = TopicMetadata(
            name=name,
            topic_id=uuid.UUID(fields["topic_id"]),
            partitions=partitions,
            configs=dict(fields.get("configs", {})),
        )
        return cls(topic, int(fields.get("controller_epoch", 0)))


@dataclass(frozen=True)
class IsrChangeRequest:
    topic: str
    partition: int
    leader_epoch: int
    partition_epoch: int
    isr: list[int]

    def encode(self) -> bytes:
        return encode_json(asdict(self))

    @classmethod
    def decode(cls, data: bytes) -> IsrChangeRequest:
        return cls(**json.loads(data))


@dataclass(frozen=True)
class ReassignRequest:
    """Move one partition to ``replicas`` (None: cancel its reassignment)."""

    topic: str
    partition: int
    replicas: list[int] | None

    def encode(self) -> bytes:
        return encode_json(asdict(self))

    @classmethod
    def decode(cls, data: bytes) -> ReassignRequest:
        return cls(**json.loads(data))
