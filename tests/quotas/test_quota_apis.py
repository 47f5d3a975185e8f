"""DescribeClientQuotas and AlterClientQuotas against a real broker process, through
kafka-python 3.0's admin client (confluent-kafka 2.16's AdminClient has no client
quota calls, and librdkafka none in its C API): both versions, Kafka's answers to bad
input, and quotas that outlive a broker restart, in force again (a real confluent-kafka
producer over its quota is told to back off). The ACL checks run on an in-process
broker with an authorizer."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import confluent_kafka as ck
import pytest
from inprocess_broker import connect, run, running_broker
from kafka.admin import KafkaAdminClient
from kafka.protocol.admin.client_quotas import (
    AlterClientQuotasRequest,
    DescribeClientQuotasRequest,
)

from epochlog.protocol.errors import ErrorCode
from support.broker import BrokerProcess, run_epochlog
from support.clients import create_topic

Entity = list[tuple[str, str | None]]

EXACT, DEFAULT, SPECIFIED = 0, 1, 2


@pytest.fixture
def broker(broker_factory: Any) -> Iterator[BrokerProcess]:
    yield broker_factory()


class KafkaPythonAdmin:
    """kafka-python's admin client sending the client quota requests of its protocol
    classes (the library has the messages but no admin methods for them yet)."""

    def __init__(self, bootstrap: str) -> None:
        self.admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="quota-tests")

    def send(self, request: Any) -> Any:
        manager = self.admin._manager

        async def call() -> Any:
            return await manager.send(request)

        return manager.run(call)

    def alter(
        self, entries: list[tuple[Entity, dict[str, float | None]]], version: int = 1,
        validate_only: bool = False,
    ) -> list[tuple[Entity, int, str | None]]:  # fmt: skip
        E = AlterClientQuotasRequest.EntryData
        request = AlterClientQuotasRequest(
            entries=[
                E(
                    entity=[E.EntityData(entity_type=t, entity_name=n) for t, n in entity],
                    ops=[E.OpData(key=k, value=v or 0.0, remove=v is None) for k, v in ops.items()],
                )
                for entity, ops in entries
            ],
            validate_only=validate_only,
            max_version=version,
        )
        response = self.send(request)
        assert response.throttle_time_ms == 0
        return [
            ([(e.entity_type, e.entity_name) for e in r.entity], r.error_code, r.error_message)
            for r in response.entries
        ]

    def describe(
        self, components: list[tuple[str, int, str | None]], strict: bool = False, version: int = 1
    ) -> Any:
        C = DescribeClientQuotasRequest.ComponentData
        request = DescribeClientQuotasRequest(
            components=[C(entity_type=t, match_type=m, match=n) for t, m, n in components],
            strict=strict,
            max_version=version,
        )
        return self.send(request)

    def quotas(self, *args: Any, **kwargs: Any) -> dict[tuple[tuple[str, str | None], ...], dict]:
        response = self.describe(*args, **kwargs)
        assert response.error_code == 0, response.error_message
        return {
            tuple((e.entity_type, e.entity_name) for e in entry.entity): {
                v.key: v.value for v in entry.values
            }
            for entry in response.entries
        }

    def close(self) -> None:
        self.admin.close()


ALICE = [("user", "alice")]
ALICE_APP = [("user", "alice"), ("client-id", "app")]
CLIENT_DEFAULT = [("client-id", None)]
SLOW = [("client-id", "slow")]


def _throttled_producer_reports(bootstrap: str, topic: str) -> list[float]:
    """Throttle times a confluent-kafka producer with client id "slow" is told, producing
    until it is told one (librdkafka hands each response's throttle_time_ms to
    throttle_cb); what it still holds then is dropped."""
    throttles: list[float] = []
    producer = ck.Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": "slow",
            "linger.ms": 5,
            "queue.buffering.max.kbytes": 2048,
            "throttle_cb": lambda event: throttles.append(event.throttle_time),
        }
    )
    deadline = time.monotonic() + 60
    for _ in range(2000):
        while True:
            try:
                producer.produce(topic, b"x" * 10_000)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
        if throttles or time.monotonic() > deadline:
            break
    producer.purge()
    producer.flush(10)
    return throttles


def test_quotas_through_kafka_python_and_a_restart(broker: BrokerProcess) -> None:
    admin = KafkaPythonAdmin(broker.bootstrap)
    try:
        assert admin.alter(
            [
                (ALICE, {"producer_byte_rate": 1048576, "consumer_byte_rate": 2097152}),
                (ALICE_APP, {"request_percentage": 12.5}),
                (CLIENT_DEFAULT, {"consumer_byte_rate": 5_000_000}),
            ]
        ) == [(ALICE, 0, None), (ALICE_APP, 0, None), (CLIENT_DEFAULT, 0, None)]
        assert admin.alter([(SLOW, {"producer_byte_rate": 100_000})], version=0) == [
            (SLOW, 0, None)
        ]
        expected = {
            (("user", "alice"),): {"producer_byte_rate": 1048576.0,
                                   "consumer_byte_rate": 2097152.0},
            (("user", "alice"), ("client-id", "app")): {"request_percentage": 12.5},
            (("client-id", None),): {"consumer_byte_rate": 5e6},
            (("client-id", "slow"),): {"producer_byte_rate": 1e5},
        }  # fmt: skip
        for version in (0, 1):
            assert admin.quotas([], version=version) == expected
        # kafka-configs.sh's filters: exact names, defaults, any name, strict or not.
        assert admin.quotas([("user", EXACT, "alice")], strict=True) == {
            (("user", "alice"),): expected[(("user", "alice"),)]
        }
        assert set(admin.quotas([("user", EXACT, "alice")])) == {
            (("user", "alice"),),
            (("user", "alice"), ("client-id", "app")),
        }
        assert set(admin.quotas([("client-id", DEFAULT, None)], strict=True)) == {
            (("client-id", None),)
        }
        assert set(admin.quotas([("client-id", SPECIFIED, None)], strict=True)) == {
            (("client-id", None),),
            (("client-id", "slow"),),
        }
        # validate_only checks and writes nothing; a removal takes one key away.
        assert admin.alter([(ALICE, {"producer_byte_rate": 5})], validate_only=True)[0][1] == 0
        assert admin.alter([(ALICE, {"consumer_byte_rate": None})])[0][1] == 0
        expected[(("user", "alice"),)] = {"producer_byte_rate": 1048576.0}
        assert admin.quotas([]) == expected
    finally:
        admin.close()

    broker.stop()
    broker.restart()
    admin = KafkaPythonAdmin(broker.bootstrap)
    try:
        assert admin.quotas([]) == expected, "quotas live in the metastore"
    finally:
        admin.close()
    # And they are in force: the producer of client id "slow" (100 kB/s) is throttled.
    create_topic(broker.bootstrap, "restarted")
    throttles = _throttled_producer_reports(broker.bootstrap, "restarted")
    assert throttles and max(throttles) > 0


def test_bad_input_gets_kafkas_error_codes(broker: BrokerProcess) -> None:
    admin = KafkaPythonAdmin(broker.bootstrap)
    invalid = ErrorCode.INVALID_REQUEST
    try:
        answers = admin.alter(
            [
                ([("group", "g")], {"producer_byte_rate": 1}),
                ([("user", "a")], {"no_such_quota": 1}),
                ([("user", "b")], {"producer_byte_rate": -1024}),
                ([("user", "c")], {"request_percentage": 0}),
                ([("user", "d")], {"consumer_byte_rate": 10.5}),
                ([], {"producer_byte_rate": 1}),
                ([("user", "")], {"producer_byte_rate": 1}),
                ([("ip", "127.0.0.1")], {"connection_creation_rate": 1}),
                ([("user", "e")], {"producer_byte_rate": 1000}),
            ]
        )
        codes = {tuple(entity): code for entity, code, _ in answers}
        messages = {tuple(entity): message for entity, _, message in answers}
        assert codes == {
            (("group", "g"),): invalid,
            (("user", "a"),): invalid,
            (("user", "b"),): invalid,
            (("user", "c"),): invalid,
            (("user", "d"),): invalid,
            (): invalid,
            (("user", ""),): invalid,
            (("ip", "127.0.0.1"),): invalid,
            (("user", "e"),): ErrorCode.NONE,
        }
        assert messages[(("group", "g"),)] == "Unhandled client quota entity type: group"
        assert messages[(("user", "a"),)] == "Invalid configuration key no_such_quota"
        assert messages[(("user", "b"),)] == "Quota producer_byte_rate must be greater than 0"
        assert admin.quotas([]) == {(("user", "e"),): {"producer_byte_rate": 1000.0}}

        unknown = admin.describe([("group", EXACT, "g")])
        assert (unknown.error_code, unknown.error_message) == (
            ErrorCode.UNSUPPORTED_VERSION,
            "Unsupported entity type group",
        )
        assert unknown.entries is None
        twice = admin.describe([("user", EXACT, "a"), ("user", DEFAULT, None)])
        assert twice.error_code == invalid
        no_match = admin.describe([("user", EXACT, None)])
        assert no_match.error_code == invalid
    finally:
        admin.close()


def test_quota_apis_need_cluster_acls(tmp_path: Any) -> None:
    async def scenario() -> None:
        async with running_broker(
            tmp_path,
            authorizer_class_name="kafka.security.authorizer.AclAuthorizer",
            allow_everyone_if_no_acl_found="false",
        ) as broker:
            conn = await connect(broker)
            E = AlterClientQuotasRequest.EntryData
            alter = AlterClientQuotasRequest(
                entries=[
                    E(
                        entity=[E.EntityData(entity_type="user", entity_name="x")],
                        ops=[E.OpData(key="producer_byte_rate", value=1.0, remove=False)],
                    )
                ],
                validate_only=False,
            )
            answer = await conn.send(alter, 1)
            assert answer.entries[0].error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            describe = DescribeClientQuotasRequest(components=[], strict=False)
            answer = await conn.send(describe, 1)
            assert answer.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            assert broker.quotas.produce.limits == {}
            await conn.close()

    run(scenario)


def test_epochlog_quotas_command(broker: BrokerProcess) -> None:
    def quotas(*args: str) -> str:
        done = run_epochlog("quotas", *args, "--bootstrap-server", broker.bootstrap)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    assert quotas(
        "alter", "--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients",
        "--entity-default", "--add-config", "producer_byte_rate=1048576,request_percentage=25",
    ) == "Completed updating config for user 'alice', client-id <default>."  # fmt: skip
    quotas("alter", "--client", "app", "--add-config", "consumer_byte_rate=2000000")
    quotas("alter", "--user-defaults", "--add-config", "producer_byte_rate=500000")
    assert quotas("describe").splitlines() == [
        "Quota configs for client-id 'app' are consumer_byte_rate=2000000.0",
        "Quota configs for user-principal 'alice', client-id <default> are "
        "producer_byte_rate=1048576.0, request_percentage=25.0",
        "Quota configs for user-principal <default> are producer_byte_rate=500000.0",
    ]
    # kafka-configs.sh's describe: exactly the entity types named.
    assert quotas("describe", "--entity-type", "users").splitlines() == [
        "Quota configs for user-principal <default> are producer_byte_rate=500000.0"
    ]
    assert quotas(
        "describe",
        "--entity-type",
        "users",
        "--entity-name",
        "alice",
        "--entity-type",
        "clients",
        "--json",
    ) == json.dumps(  # fmt: skip
        [
            {
                "entity": {"user": "alice", "client-id": "<default>"},
                "quotas": {"producer_byte_rate": 1048576.0, "request_percentage": 25.0},
            }
        ],
        indent=2,
    )
    quotas("alter", "--client", "app", "--delete-config", "consumer_byte_rate")
    assert "client-id 'app'" not in quotas("describe")
    refused = run_epochlog(
        "quotas", "alter", "--client", "app", "--add-config", "producer_byte_rate=-1",
        "--bootstrap-server", broker.bootstrap,
    )  # fmt: skip
    assert refused.returncode == 1
    assert "INVALID_REQUEST" in refused.stderr
    assert "producer_byte_rate must be greater than 0" in refused.stderr
