"""DescribeCluster and the legacy AlterConfigs against a real broker process, through
the admin clients that send them: confluent-kafka's describe_cluster and alter_configs
(whole-set semantics: a setting left out returns to its default) and kafka-python's."""

from __future__ import annotations

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType

from support.broker import BrokerProcess

pytestmark = pytest.mark.filterwarnings("ignore:alter_configs has been deprecated")


def topic_configs(admin: AdminClient, topic: str) -> dict[str, str]:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entries = admin.describe_configs([resource])[resource].result(30)
    return {name: entry.value for name, entry in entries.items()}


def test_describe_cluster_names_the_brokers_and_the_controller(
    module_broker: BrokerProcess,
) -> None:
    admin = AdminClient({"bootstrap.servers": module_broker.bootstrap})
    described = admin.describe_cluster(request_timeout=30).result(30)
    assert [n.id for n in described.nodes] == [0]
    assert described.nodes[0].port == module_broker.port
    assert described.controller is not None and described.controller.id == 0
    assert described.cluster_id


def test_legacy_alter_configs_replaces_the_whole_set(module_broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": module_broker.bootstrap})
    admin.create_topics([NewTopic("legacy-cfg", 1, 1, config={"cleanup.policy": "compact"})])[
        "legacy-cfg"
    ].result(30)
    resource = ConfigResource(
        ConfigResource.Type.TOPIC, "legacy-cfg", set_config={"retention.ms": "123456"}
    )
    admin.alter_configs([resource])[resource].result(30)  # deprecated in librdkafka, still sent
    configs = topic_configs(admin, "legacy-cfg")
    assert configs["retention.ms"] == "123456"
    assert configs["cleanup.policy"] == "delete"  # left out, so back to its default

    kp = KafkaAdminClient(bootstrap_servers=module_broker.bootstrap)
    try:
        kp.alter_configs(
            [
                KpConfigResource(
                    ConfigResourceType.TOPIC, "legacy-cfg", {"min.insync.replicas": "1"}
                )
            ],
            incremental=False,  # kafka-python picks the incremental API when it may
        )
    finally:
        kp.close()
    configs = topic_configs(admin, "legacy-cfg")
    # kafka-python restates the topic's other settings in a legacy request.
    assert configs["min.insync.replicas"] == "1" and configs["retention.ms"] == "123456"

    bad = ConfigResource(ConfigResource.Type.TOPIC, "legacy-cfg", set_config={"no.such": "1"})
    error = admin.alter_configs([bad])[bad].exception(30)
    assert isinstance(error, ck.KafkaException) and "INVALID_CONFIG" in str(error)
