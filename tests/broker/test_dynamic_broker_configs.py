"""Dynamic broker settings through the admin clients that change them (confluent-kafka's
incremental_alter_configs, kafka-python's alter_configs) on a real broker process: per
broker (its id) and the cluster-wide default (the empty name, in the requests of
kafka-configs.sh --entity-default),
reported by describe_configs with Kafka's sources and synonyms, honoured at once by the
running broker (a topic without its own setting follows the broker's), refused as Kafka
refuses read-only ones, and kept across a restart."""

from __future__ import annotations

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
)
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType

from support.broker import BrokerProcess
from support.clients import create_topic
from support.requests import alter_broker_configs, describe_broker_configs

pytestmark = pytest.mark.filterwarnings("ignore:alter_configs has been deprecated")

BOUND_S = 60
BROKER = ConfigResource.Type.BROKER
SET, DELETE = AlterConfigOpType.SET.value, AlterConfigOpType.DELETE.value


def _alter(admin: AdminClient, name: str, **changes: tuple[int, str]) -> None:
    entries = [
        ConfigEntry(key.replace("_", "."), value, incremental_operation=AlterConfigOpType(op))
        for key, (op, value) in changes.items()
    ]
    resource = ConfigResource(BROKER, name, incremental_configs=entries)
    admin.incremental_alter_configs([resource])[resource].result(BOUND_S)


def _describe(admin: AdminClient, kind: ConfigResource.Type, name: str) -> dict[str, ConfigEntry]:
    resource = ConfigResource(kind, name)
    return admin.describe_configs([resource])[resource].result(BOUND_S)


def _synonyms(bootstrap: str, name: str, setting: str) -> list[tuple[str, str | None, str]]:
    """A broker setting's synonyms through kafka-python (confluent-kafka keys them by
    name, which hides a name set at several levels)."""
    kp = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        resource = KpConfigResource(ConfigResourceType.BROKER, name, [setting])
        described = kp.describe_configs([resource], include_synonyms=True, config_filter="all")
    finally:
        kp.close()
    synonyms = described["broker"][name][setting]["synonyms"]
    return [(s["name"], s["value"], s["source"]) for s in synonyms]


def _produce(bootstrap: str, topic: str, size: int, acks: str = "1") -> str | None:
    """The delivery error of one record of ``size`` bytes, None when it was stored."""
    producer = ck.Producer({"bootstrap.servers": bootstrap, "acks": acks, "retries": 0})
    outcome: list[str | None] = []
    producer.produce(topic, b"x" * size, on_delivery=lambda e, _m: outcome.append(e and e.name()))
    assert producer.flush(BOUND_S) == 0
    return outcome[0]


def test_per_broker_and_cluster_wide_settings_are_described_honoured_and_kept(
    broker_factory,
) -> None:
    broker: BrokerProcess = broker_factory({"log.retention.hours": "100"})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    create_topic(broker.bootstrap, "follows")
    assert _produce(broker.bootstrap, "follows", 5000) is None

    _alter(admin, "0", message_max_bytes=(SET, "2000"), log_retention_ms=(SET, "3600000"))
    described = _describe(admin, BROKER, "0")
    retention = described["log.retention.ms"]
    assert (retention.value, ConfigSource(retention.source)) == (
        "3600000",
        ConfigSource.DYNAMIC_BROKER_CONFIG,
    )
    assert not retention.is_read_only
    # Kafka's order: by level, then log.retention.ms before .hours; then the default.
    assert _synonyms(broker.bootstrap, "0", "log.retention.ms") == [
        ("log.retention.ms", "3600000", "DYNAMIC_BROKER_CONFIG"),
        ("log.retention.hours", "100", "STATIC_BROKER_CONFIG"),
        ("log.retention.hours", "168", "DEFAULT_CONFIG"),
    ]
    assert described["broker.id"].is_read_only
    assert ConfigSource(described["log.dirs"].source) == ConfigSource.STATIC_BROKER_CONFIG
    assert ConfigSource(described["message.max.bytes"].source) == ConfigSource.DYNAMIC_BROKER_CONFIG

    # The topic has no setting of its own: it follows the broker's, at once.
    topic = _describe(admin, ConfigResource.Type.TOPIC, "follows")
    assert (topic["retention.ms"].value, ConfigSource(topic["retention.ms"].source)) == (
        "3600000",
        ConfigSource.DYNAMIC_BROKER_CONFIG,
    )
    assert topic["max.message.bytes"].value == "2000"
    assert _produce(broker.bootstrap, "follows", 5000) == "MSG_SIZE_TOO_LARGE"
    assert _produce(broker.bootstrap, "follows", 500) is None

    # The cluster-wide default (the empty name) lists only what is set there.
    # (Neither client can name it: these requests are kafka-configs.sh --entity-default's.)
    default = {"min.insync.replicas": (SET, "2"), "log.retention.ms": (SET, "60000")}
    assert alter_broker_configs(broker.port, "", default).error_code == 0
    assert describe_broker_configs(broker.port, "") == {
        "log.retention.ms": ("60000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value),
        "min.insync.replicas": ("2", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value),
    }
    described = _describe(admin, BROKER, "0")
    # The broker's own setting wins over the cluster-wide one.
    assert described["log.retention.ms"].value == "3600000"
    assert _synonyms(broker.bootstrap, "0", "log.retention.ms")[:2] == [
        ("log.retention.ms", "3600000", "DYNAMIC_BROKER_CONFIG"),
        ("log.retention.ms", "60000", "DYNAMIC_DEFAULT_BROKER_CONFIG"),
    ]
    assert (
        ConfigSource(described["min.insync.replicas"].source)
        == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    )
    # One replica is fewer than the min.insync.replicas every topic now defaults to.
    assert _produce(broker.bootstrap, "follows", 10, acks="all") == "NOT_ENOUGH_REPLICAS"

    # Read-only settings are refused as Kafka refuses them; nothing is changed.
    resource = ConfigResource(
        BROKER,
        "0",
        incremental_configs=[
            ConfigEntry("log.dirs", "/elsewhere", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    error = admin.incremental_alter_configs([resource])[resource].exception(BOUND_S)
    assert isinstance(error, ck.KafkaException)
    assert error.args[0].code() == ck.KafkaError.INVALID_REQUEST
    assert "Cannot update these configs dynamically: Set(log.dirs)" in str(error)
    refused = alter_broker_configs(broker.port, "", {"min.insync.replicas": (SET, "none")})
    assert refused.error_code == ck.KafkaError.INVALID_REQUEST
    assert describe_broker_configs(broker.port, "")["min.insync.replicas"][0] == "2"

    # Another broker's id, or no id: Kafka's INVALID_REQUEST, nothing written.
    for name in ("7", "leader"):
        answer = alter_broker_configs(broker.port, name, {"log.retention.ms": (SET, "1")})
        assert answer.error_code == ck.KafkaError.INVALID_REQUEST, answer
    unknown = alter_broker_configs(broker.port, "0", {"no.such.setting": (SET, "1")})
    assert unknown.error_code == ck.KafkaError.INVALID_CONFIG
    assert describe_broker_configs(broker.port, "0")["log.retention.ms"][0] == "3600000"

    # Kept across a restart.
    broker.stop()
    broker.restart()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    described = _describe(admin, BROKER, "0")
    assert described["log.retention.ms"].value == "3600000"
    assert described["min.insync.replicas"].value == "2"
    assert _produce(broker.bootstrap, "follows", 5000) == "MSG_SIZE_TOO_LARGE"

    # DELETE takes a level's setting away: the cluster-wide one shows through.
    _alter(admin, "0", log_retention_ms=(DELETE, ""), message_max_bytes=(DELETE, ""))
    deleted = alter_broker_configs(broker.port, "", {"min.insync.replicas": (DELETE, None)})
    assert deleted.error_code == 0
    described = _describe(admin, BROKER, "0")
    assert (
        described["log.retention.ms"].value,
        ConfigSource(described["log.retention.ms"].source),
    ) == (
        "60000",
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
    )
    assert ConfigSource(described["message.max.bytes"].source) == ConfigSource.DEFAULT_CONFIG
    assert _produce(broker.bootstrap, "follows", 5000, acks="all") is None


def test_kafka_python_alters_and_describes_broker_settings(module_broker: BrokerProcess) -> None:
    kp = KafkaAdminClient(bootstrap_servers=module_broker.bootstrap)
    try:
        changes = {"log.segment.bytes": "1048576", "log.cleanup.policy": ("APPEND", "compact")}
        own = KpConfigResource(ConfigResourceType.BROKER, "0", changes)
        assert kp.alter_configs([own]) == {"broker": {"0": "OK"}}
        wanted = ["log.segment.bytes", "log.cleanup.policy"]
        described = kp.describe_configs([KpConfigResource(ConfigResourceType.BROKER, "0", wanted)])
        segment, policy = (described["broker"]["0"][n] for n in wanted)
        assert (segment["value"], segment["config_source"]) == ("1048576", "DYNAMIC_BROKER_CONFIG")
        # APPEND to the default "delete", as Kafka appends to a list setting.
        assert set(policy["value"].split(",")) == {"delete", "compact"}
        assert policy["config_source"] == "DYNAMIC_BROKER_CONFIG"
        # Past kafka-python's own check, the broker refuses a read-only setting.
        refused = kp.alter_configs(
            [KpConfigResource(ConfigResourceType.BROKER, "0", {"broker.id": "5"})],
            raise_on_unknown=False,
        )
        assert "Cannot update these configs dynamically: Set(broker.id)" in refused["broker"]["0"]
        assert "InvalidRequest" in refused["broker"]["0"]
    finally:
        kp.close()

    # The legacy AlterConfigs replaces the level's whole set: what it leaves out goes.
    admin = AdminClient({"bootstrap.servers": module_broker.bootstrap})
    legacy = ConfigResource(BROKER, "0", set_config={"log.roll.ms": "600000"})
    admin.alter_configs([legacy])[legacy].result(BOUND_S)
    described = _describe(admin, BROKER, "0")
    assert (described["log.roll.ms"].value, ConfigSource(described["log.roll.ms"].source)) == (
        "600000",
        ConfigSource.DYNAMIC_BROKER_CONFIG,
    )
    assert ConfigSource(described["log.segment.bytes"].source) == ConfigSource.DEFAULT_CONFIG
