"""Topic configs as Kafka documents them, against a real broker process through the
clients that set them: every name Kafka knows accepted by CreateTopics,
IncrementalAlterConfigs (APPEND/SUBTRACT on lists) and AlterConfigs, described with its
source; compression.type, message.timestamp.* and max.message.bytes honoured on
produce, seen by producers and consumers and in the stored batches."""

from __future__ import annotations

import time

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType

from epochlog.protocol.batch import read_header
from epochlog.settings.topic import TOPIC
from support.broker import BrokerProcess
from support.kafka_configs import KAFKA_TOPIC_CONFIGS
from support.segments import segment_files

pytestmark = pytest.mark.filterwarnings("ignore:alter_configs has been deprecated")


def _admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def _create(broker: BrokerProcess, topic: str, config: dict[str, str]) -> None:
    admin = _admin(broker)  # held until the answer: a dropped client cancels its calls
    admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(30)


def _described(broker: BrokerProcess, topic: str) -> dict[str, ConfigEntry]:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    admin = _admin(broker)
    return admin.describe_configs([resource])[resource].result(30)


def _produce(broker: BrokerProcess, topic: str, values: list[bytes], **kwargs: object) -> list:
    """Each message's delivery report (the message, whose error() is None when stored)."""
    reports: list = []
    producer = ck.Producer(
        {"bootstrap.servers": broker.bootstrap, "linger.ms": 0, **kwargs}  # type: ignore[dict-item]
    )
    for value in values:
        producer.produce(topic, value, on_delivery=lambda err, msg: reports.append(msg))
    assert producer.flush(30) == 0
    return reports


def _stored_codecs(broker: BrokerProcess, topic: str) -> list[int]:
    data = b"".join(path.read_bytes() for path in segment_files(broker.log_dir, topic))
    codecs, pos = [], 0
    while pos < len(data):
        header = read_header(data, pos)
        codecs.append(header.compression)
        pos += header.size
    return codecs


def test_every_kafka_topic_config_is_accepted_by_create_topics_and_described_with_source(
    module_broker: BrokerProcess,
) -> None:
    given = {"compression.type": "zstd", "preallocate": "true", "segment.jitter.ms": "7"}
    _create(module_broker, "cfg-all", given)
    entries = _described(module_broker, "cfg-all")
    assert set(entries) == {s.name for s in TOPIC}
    for name, value in given.items():
        assert entries[name].value == value
        assert entries[name].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    default = entries["message.timestamp.before.max.ms"]
    assert default.is_default and default.value == str((1 << 63) - 1)
    assert default.source == ConfigSource.DEFAULT_CONFIG.value
    kp = KafkaAdminClient(bootstrap_servers=module_broker.bootstrap)
    try:
        kp.alter_configs(
            [KpConfigResource(ConfigResourceType.TOPIC, "cfg-all", {"compression.type": "lz4"})],
            incremental=False,
        )
    finally:
        kp.close()
    entries = _described(module_broker, "cfg-all")
    # kafka-python restates the other overrides; the one it changed is now lz4.
    assert entries["compression.type"].value == "lz4" and entries["preallocate"].value == "true"


def test_every_kafka_topic_config_name_is_accepted_by_create_and_incremental_alter(
    module_broker: BrokerProcess,
) -> None:
    # Kafka's defaults are values Kafka accepts, so each name is given one.
    _create(module_broker, "cfg-every", KAFKA_TOPIC_CONFIGS)
    entries = _described(module_broker, "cfg-every")
    assert {
        n for n, e in entries.items() if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    } == set(KAFKA_TOPIC_CONFIGS)
    admin = _admin(module_broker)
    changes = [
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        for name, value in KAFKA_TOPIC_CONFIGS.items()
        if name != "segment.jitter.ms"
    ] + [ConfigEntry("segment.jitter.ms", None, incremental_operation=AlterConfigOpType.DELETE)]
    resource = ConfigResource(ConfigResource.Type.TOPIC, "cfg-every", incremental_configs=changes)
    admin.incremental_alter_configs([resource])[resource].result(30)
    assert _described(module_broker, "cfg-every")["segment.jitter.ms"].is_default


def test_incremental_alter_configs_appends_to_and_subtracts_from_cleanup_policy(
    module_broker: BrokerProcess,
) -> None:
    _create(module_broker, "cfg-lists", {})
    admin = _admin(module_broker)

    def alter(op: AlterConfigOpType, name: str, value: str) -> None:
        resource = ConfigResource(
            ConfigResource.Type.TOPIC,
            "cfg-lists",
            incremental_configs=[ConfigEntry(name, value, incremental_operation=op)],
        )
        admin.incremental_alter_configs([resource])[resource].result(30)

    alter(AlterConfigOpType.APPEND, "cleanup.policy", "compact")
    assert _described(module_broker, "cfg-lists")["cleanup.policy"].value == "compact,delete"
    alter(AlterConfigOpType.SUBTRACT, "cleanup.policy", "delete")
    assert _described(module_broker, "cfg-lists")["cleanup.policy"].value == "compact"
    with pytest.raises(ck.KafkaException, match="INVALID_CONFIG"):
        alter(AlterConfigOpType.APPEND, "retention.ms", "1")


def test_compression_type_makes_the_leader_store_batches_in_the_topic_codec(
    module_broker: BrokerProcess,
) -> None:
    _create(module_broker, "cfg-zstd", {"compression.type": "zstd"})
    _create(module_broker, "cfg-producer", {})
    values = [b"value-%d" % i * 20 for i in range(50)]
    for topic in ("cfg-zstd", "cfg-producer"):
        settings = {"compression.type": "lz4", "enable.idempotence": True}
        reports = _produce(module_broker, topic, values, **settings)
        assert all(r.error() is None for r in reports)
    assert set(_stored_codecs(module_broker, "cfg-zstd")) == {4}
    assert set(_stored_codecs(module_broker, "cfg-producer")) == {3}
    consumer = ck.Consumer({"bootstrap.servers": module_broker.bootstrap, "group.id": "cfg-z",
                            "auto.offset.reset": "earliest"})  # fmt: skip
    try:
        consumer.subscribe(["cfg-zstd"])
        read: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(read) < len(values) and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                read.append(message.value())
    finally:
        consumer.close()
    assert read == values


def test_log_append_time_replaces_the_producers_timestamp(module_broker: BrokerProcess) -> None:
    _create(module_broker, "cfg-lat", {"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    producer = ck.Producer({"bootstrap.servers": module_broker.bootstrap})
    reports: list = []
    producer.produce("cfg-lat", b"v", timestamp=1_000, on_delivery=lambda e, m: reports.append(m))
    assert producer.flush(30) == 0
    ((kind, stamp),) = [r.timestamp() for r in reports]
    assert kind == ck.TIMESTAMP_LOG_APPEND_TIME and stamp >= before
    consumer = ck.Consumer({"bootstrap.servers": module_broker.bootstrap, "group.id": "cfg-l",
                            "auto.offset.reset": "earliest"})  # fmt: skip
    try:
        consumer.subscribe(["cfg-lat"])
        message = None
        deadline = time.monotonic() + 30
        while message is None and time.monotonic() < deadline:
            polled = consumer.poll(1.0)
            message = polled if polled is not None and polled.error() is None else None
    finally:
        consumer.close()
    assert message is not None and message.timestamp() == (ck.TIMESTAMP_LOG_APPEND_TIME, stamp)


def test_timestamps_outside_the_topic_bounds_and_too_large_batches_are_refused(
    module_broker: BrokerProcess,
) -> None:
    _create(
        module_broker,
        "cfg-bounds",
        {"message.timestamp.before.max.ms": "60000", "max.message.bytes": "2000"},
    )
    producer = ck.Producer({"bootstrap.servers": module_broker.bootstrap, "linger.ms": 0,
                            "retries": 0})  # fmt: skip
    errors: list = []
    hour_ago = int(time.time() * 1000) - 3_600_000
    for value, stamp in ((b"old", hour_ago), (b"x" * 5000, 0), (b"fine", 0)):
        # One request each, so that each is judged on its own.
        producer.produce("cfg-bounds", value, timestamp=stamp,
                         on_delivery=lambda e, m: errors.append(e))  # fmt: skip
        assert producer.flush(30) == 0
    codes = sorted((e.code() if e is not None else 0) for e in errors)
    expected = [0, ck.KafkaError.MSG_SIZE_TOO_LARGE, ck.KafkaError.INVALID_TIMESTAMP]
    assert codes == sorted(expected)
