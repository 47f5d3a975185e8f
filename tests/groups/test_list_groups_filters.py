"""ListGroups as Kafka answers it: each group's state and type (``classic``), filtered
by states (v4, KIP-518) and by types (v5, KIP-848), through confluent-kafka's
``list_consumer_groups`` and kafka-python's ``list_groups``."""

from __future__ import annotations

import confluent_kafka as ck
from confluent_kafka import ConsumerGroupState, ConsumerGroupType, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient

from support.clients import create_topic
from support.member_threads import wait_for

BOUND_S = 60
SETTINGS = {
    "offsets.topic.num.partitions": 3,
    "offsets.topic.replication.factor": 1,
    "group.initial.rebalance.delay.ms": 0,
}


def _listed(admin: AdminClient, **filters: object) -> dict[str, tuple[object, object]]:
    result = admin.list_consumer_groups(request_timeout=30, **filters).result(BOUND_S)
    assert not result.errors, result.errors
    return {g.group_id: (g.state, g.type) for g in result.valid}


def test_groups_are_listed_with_their_state_and_type_and_filtered_by_both(
    broker_factory,
) -> None:
    broker = broker_factory(SETTINGS)
    conf = {"bootstrap.servers": broker.bootstrap}
    create_topic(broker.bootstrap, "listed")
    idle = ck.Consumer({**conf, "group.id": "idle", "enable.auto.commit": False})
    idle.commit(offsets=[TopicPartition("listed", 0, 0)], asynchronous=False)
    idle.close()
    member = ck.Consumer({**conf, "group.id": "busy", "auto.offset.reset": "earliest"})
    try:
        member.subscribe(["listed"])

        def stable() -> bool:
            member.poll(0.2)
            return bool(member.assignment())

        wait_for(stable, "the busy group's member to be assigned", [])
        admin = AdminClient(conf)
        stable_, empty, classic = (
            ConsumerGroupState.STABLE,
            ConsumerGroupState.EMPTY,
            ConsumerGroupType.CLASSIC,
        )
        assert _listed(admin) == {"busy": (stable_, classic), "idle": (empty, classic)}
        assert _listed(admin, states={stable_}) == {"busy": (stable_, classic)}
        assert _listed(admin, states={empty}) == {"idle": (empty, classic)}
        assert _listed(admin, types={classic}) == {
            "busy": (stable_, classic),
            "idle": (empty, classic),
        }
        # KIP-848 groups are not served here: none is of type consumer.
        assert _listed(admin, types={ConsumerGroupType.CONSUMER}) == {}
        assert _listed(admin, states={empty}, types={classic}) == {"idle": (empty, classic)}

        kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        try:
            listed = kp.list_groups(states_filter=["Stable"], types_filter=["classic"])
            assert [(g["group_id"], g["group_state"], g["group_type"]) for g in listed] == [
                ("busy", "Stable", "classic")
            ]
            assert kp.list_groups(types_filter=["consumer"]) == []
        finally:
            kp.close()
    finally:
        member.close()
