"""A cluster-wide default broker setting, set once through one broker of three, is
followed by every broker without a restart (each reports it through confluent-kafka's
describe_configs as DYNAMIC_DEFAULT_BROKER_CONFIG and enforces it on the partition it
leads), a broker's own setting wins over it on that broker alone, and a restarted broker
still has both."""

from __future__ import annotations

from pathlib import Path

import confluent_kafka as ck
from cluster_harness import Cluster, eventually, running_cluster
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
)

from support.requests import alter_broker_configs

TOPIC = "everywhere"
BOUND_S = 60
SET = 0
LARGE = 5000


def _described(cluster: Cluster, broker: int) -> tuple[str, int]:
    """message.max.bytes as ``broker`` reports it (librdkafka asks that broker)."""
    admin = AdminClient({"bootstrap.servers": cluster.live_bootstrap()})
    resource = ConfigResource(ConfigResource.Type.BROKER, str(broker))
    entry = admin.describe_configs([resource])[resource].result(BOUND_S)["message.max.bytes"]
    return entry.value, entry.source


def _produce(cluster: Cluster, partition: int) -> str | None:
    """The delivery error of one large record to ``partition``, None when stored."""
    producer = ck.Producer(
        {"bootstrap.servers": cluster.live_bootstrap(), "acks": "1", "retries": 0}
    )
    outcome: list[str | None] = []
    producer.produce(
        TOPIC, b"x" * LARGE, partition=partition,
        on_delivery=lambda e, _m: outcome.append(e and e.name()),
    )  # fmt: skip
    assert producer.flush(BOUND_S) == 0
    return outcome[0]


def test_every_broker_follows_the_cluster_wide_default_and_keeps_it(
    tmp_path: Path, metastore_uri: str
) -> None:
    with running_cluster(tmp_path, metastore_uri) as cluster:
        # One partition led by each broker.
        cluster.create_topic(TOPIC, assignment=[[0], [1], [2]])
        assert [_produce(cluster, p) for p in range(3)] == [None, None, None]

        answer = alter_broker_configs(
            cluster.brokers[1].port, "", {"message.max.bytes": (SET, "2000")}
        )
        assert answer.error_code == 0, answer
        default = ("2000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
        for broker in range(3):
            eventually(
                lambda b=broker: _described(cluster, b) == default,
                BOUND_S,
                f"broker {broker} to follow the cluster-wide default",
            )
        assert [_produce(cluster, p) for p in range(3)] == ["MSG_SIZE_TOO_LARGE"] * 3

        # A broker's own setting wins there, and only there.
        entry = ConfigEntry(
            "message.max.bytes", "100000", incremental_operation=AlterConfigOpType.SET
        )
        resource = ConfigResource(ConfigResource.Type.BROKER, "0", incremental_configs=[entry])
        admin = AdminClient({"bootstrap.servers": cluster.live_bootstrap()})
        admin.incremental_alter_configs([resource])[resource].result(BOUND_S)
        own = ("100000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
        assert _described(cluster, 0) == own
        assert _described(cluster, 2) == default
        assert [_produce(cluster, p) for p in range(3)] == [
            None,
            "MSG_SIZE_TOO_LARGE",
            "MSG_SIZE_TOO_LARGE",
        ]

        # Restarted, brokers read both levels back before serving.
        for broker in (0, 2):
            cluster.kill(broker)
            cluster.brokers[broker].restart()
        cluster.wait_for_brokers()
        assert _described(cluster, 0) == own
        assert _described(cluster, 2) == default
        # (Until each leads its partition again, a produce may meet a leader change.)
        eventually(lambda: _produce(cluster, 2) == "MSG_SIZE_TOO_LARGE", BOUND_S, "p2 refused")
        eventually(lambda: _produce(cluster, 0) is None, BOUND_S, "p0 stored")


def test_turning_on_unclean_election_cluster_wide_elects_the_out_of_sync_replica(
    tmp_path: Path, metastore_uri: str
) -> None:
    with running_cluster(tmp_path, metastore_uri) as cluster:
        cluster.create_topic("stranded", assignment=[[0, 1]])
        # Broker 1 falls out of the ISR; then the only in-sync replica dies.
        cluster.pause(1)
        eventually(
            lambda: cluster.metadata("stranded", via=0)["partitions"][0].isr == [0],
            BOUND_S,
            "the paused replica to leave the ISR",
        )
        cluster.kill(0)
        cluster.resume(1)
        # On ZooKeeper the killed broker's session must expire first.
        eventually(
            lambda: cluster.metadata("stranded", via=2)["partitions"][0].leader == -1,
            BOUND_S * 2,
            "the partition to be left without a leader (unclean election is off)",
        )
        assert cluster.metadata("stranded", via=2)["partitions"][0].isr == [0]

        answer = alter_broker_configs(
            cluster.brokers[2].port, "", {"unclean.leader.election.enable": (SET, "true")}
        )
        assert answer.error_code == 0, answer
        # The controller follows the default and decides again, as Kafka's does.
        eventually(
            lambda: cluster.metadata("stranded", via=2)["partitions"][0].leader == 1,
            BOUND_S,
            "broker 1 to be elected uncleanly",
        )
