"""Real clients against a real broker process with SASL_SSL and SASL_PLAINTEXT
listeners: confluent-kafka (SCRAM-SHA-512 and PLAIN), kafka-python (SCRAM-SHA-256),
aiokafka and kcat each produce and read back; the SCRAM users were written into the
metastore by `epochlog users --metastore` before the broker started, and Kafka's own
AdminClient manages more of them; librdkafka re-authenticates (KIP-368) and keeps
working on a listener whose sessions last 1.5 s."""

from __future__ import annotations

import asyncio
import ssl
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from epochlog.tools.local_ports import free_port
from support.broker import BrokerProcess, epochlog_command
from support.certs import Certs, make_certs, ssl_listener_settings

pytestmark = pytest.mark.interop

BOUND_S = 120
REAUTH_MS = 1500
PLAIN_JAAS = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";'
)


@pytest.fixture(scope="module")
def module_certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


def epochlog_users(*args: str) -> str:
    result = subprocess.run(
        [*epochlog_command(), "users", *args], capture_output=True, text=True, timeout=BOUND_S
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.fixture(scope="module")
def sasl_broker(
    tmp_path_factory: pytest.TempPathFactory, module_certs: Certs
) -> Iterator[tuple[BrokerProcess, dict[str, int]]]:
    """A broker with PLAINTEXT (the harness's probe), SASL_SSL, SASL_PLAINTEXT and
    REAUTH (SASL_PLAINTEXT, sessions of REAUTH_MS) listeners; yields it with the ports."""
    base = tmp_path_factory.mktemp("sasl-broker")
    logs = base / "logs"
    logs.mkdir()
    store = f"sqlite://{logs / 'metastore.db'}"
    for mechanism, user in (("SCRAM-SHA-512", "bob"), ("SCRAM-SHA-256", "carol")):
        epochlog_users(
            "add", "--metastore", store, "--mechanism", mechanism, "--user", user,
            "--password", f"{user}-secret",
        )  # fmt: skip
    assert epochlog_users("list", "--metastore", store).split("\n")[:2] == [
        "bob SCRAM-SHA-512(iterations=4096)",
        "carol SCRAM-SHA-256(iterations=4096)",
    ]
    broker = BrokerProcess(logs, base, ssl_listener_settings(module_certs, "none"))
    ports = {name: free_port() for name in ("SASL_SSL", "SASL_PLAINTEXT", "REAUTH")}
    broker.settings |= {
        "listeners": f"PLAINTEXT://127.0.0.1:{broker.port},"
        + ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items()),
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,"
        "SASL_PLAINTEXT:SASL_PLAINTEXT,REAUTH:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "sasl.jaas.config": PLAIN_JAAS,
        "listener.name.reauth.connections.max.reauth.ms": str(REAUTH_MS),
    }
    broker.start()
    yield broker, ports
    try:
        broker.stop()
    finally:
        broker.close()


def librdkafka(
    ports: dict[str, int], certs: Certs, mechanism: str, user: str, listener: str = "SASL_SSL"
) -> dict[str, str]:
    conf = {
        "bootstrap.servers": f"127.0.0.1:{ports[listener]}",
        "security.protocol": "SASL_SSL" if listener == "SASL_SSL" else "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": f"{user}-secret",
    }
    return conf | ({"ssl.ca.location": str(certs.ca)} if listener == "SASL_SSL" else {})


def create_topic(conf: dict[str, str], name: str) -> None:
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(name, 1, 1)], operation_timeout=30)[name].result(60)


def confluent_round_trip(conf: dict[str, str], topic: str, count: int = 500) -> None:
    create_topic(conf, topic)
    producer = ck.Producer({**conf, "acks": "all", "enable.idempotence": True})
    values = [b"value-%d" % i for i in range(count)]
    for i, value in enumerate(values):
        producer.produce(topic, value=value, key=b"%d" % i)
    assert producer.flush(BOUND_S) == 0
    consumer = ck.Consumer(
        {**conf, "group.id": f"{topic}-readers", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([topic])
    got: list[bytes] = []
    for _ in range(BOUND_S):
        for message in consumer.consume(1000, 1.0):
            assert message.error() is None, message.error()
            got.append(message.value())
        if len(got) >= len(values):
            break
    consumer.close()
    assert got == values


@pytest.mark.parametrize(("mechanism", "user"), [("SCRAM-SHA-512", "bob"), ("PLAIN", "alice")])
def test_confluent_kafka_produces_and_consumes_over_sasl_ssl(
    sasl_broker: tuple[BrokerProcess, dict[str, int]],
    module_certs: Certs,
    mechanism: str,
    user: str,
) -> None:
    conf = librdkafka(sasl_broker[1], module_certs, mechanism, user)
    confluent_round_trip(conf, f"sasl-confluent-{mechanism.lower()}")


def test_a_wrong_password_is_refused_with_kafkas_error(
    sasl_broker: tuple[BrokerProcess, dict[str, int]], module_certs: Certs
) -> None:
    conf = librdkafka(sasl_broker[1], module_certs, "SCRAM-SHA-512", "bob")
    errors: list[Any] = []
    admin = AdminClient({**conf, "sasl.password": "wrong", "error_cb": errors.append})
    with pytest.raises(ck.KafkaException):
        admin.list_topics(timeout=10)
    for _ in range(BOUND_S):  # error_cb is served by poll
        admin.poll(0.5)
        if errors:
            break
    assert any(e.code() == ck.KafkaError._AUTHENTICATION for e in errors), errors
    assert "Authentication failed during authentication due to invalid credentials" in str(errors)


def test_kafka_admin_client_manages_scram_users_and_the_broker_accepts_them(
    sasl_broker: tuple[BrokerProcess, dict[str, int]], module_certs: Certs
) -> None:
    conf = librdkafka(sasl_broker[1], module_certs, "SCRAM-SHA-512", "bob")
    admin = AdminClient(conf)
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192)
    upsert = UserScramCredentialUpsertion("dave", info, b"dave-secret")
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(BOUND_S)
    described = {
        user: future.result(BOUND_S)
        for user, future in admin.describe_user_scram_credentials(["dave", "bob"]).items()
    }
    assert [(i.mechanism, i.iterations) for i in described["dave"].scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_512, 8192)
    ]
    assert [(i.mechanism, i.iterations) for i in described["bob"].scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_512, 4096)
    ]
    confluent_round_trip(
        librdkafka(sasl_broker[1], module_certs, "SCRAM-SHA-512", "dave"), "sasl-dave", 50
    )
    plaintext = f"127.0.0.1:{sasl_broker[0].port}"
    assert "dave SCRAM-SHA-512(iterations=8192)" in epochlog_users(
        "list", "--bootstrap-server", plaintext
    )
    epochlog_users("remove", "--bootstrap-server", plaintext, "--user", "dave")
    assert "dave" not in epochlog_users("list", "--bootstrap-server", plaintext)
    with pytest.raises(ck.KafkaException, match="nonexistent user dave"):
        admin.describe_user_scram_credentials(["dave"])["dave"].result(BOUND_S)


def test_librdkafka_re_authenticates_and_keeps_working(
    sasl_broker: tuple[BrokerProcess, dict[str, int]], module_certs: Certs
) -> None:
    broker, ports = sasl_broker
    conf = librdkafka(ports, module_certs, "SCRAM-SHA-512", "bob", listener="REAUTH")
    create_topic(conf, "sasl-reauth")
    producer = ck.Producer({**conf, "acks": "all", "linger.ms": 0})
    # Records sent across four session lifetimes, on the connections authenticated first.
    started = time.monotonic()
    sent = 0
    while time.monotonic() - started < 4 * REAUTH_MS / 1000:
        producer.produce("sasl-reauth", value=b"r-%d" % sent)
        sent += 1
        assert producer.flush(BOUND_S) == 0
        time.sleep(0.1)
    output = broker.output()
    assert "re-authenticated as User:bob (SCRAM-SHA-512)" in output
    assert "expired" not in output, "a librdkafka connection outlived its session"
    consumer = ck.Consumer({**conf, "group.id": "reauth-readers", "auto.offset.reset": "earliest"})
    consumer.subscribe(["sasl-reauth"])
    got: list[bytes] = []
    for _ in range(BOUND_S):
        got.extend(m.value() for m in consumer.consume(1000, 1.0) if m.error() is None)
        if len(got) >= sent:
            break
    consumer.close()
    assert got == [b"r-%d" % i for i in range(sent)]


@pytest.mark.parametrize("listener", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_kcat_produces_and_consumes_over_sasl(
    sasl_broker: tuple[BrokerProcess, dict[str, int]], module_certs: Certs, kcat: str, listener: str
) -> None:
    conf = librdkafka(sasl_broker[1], module_certs, "SCRAM-SHA-256", "carol", listener)
    topic = f"sasl-kcat-{listener.lower()}"
    create_topic(conf, topic)
    options = ["-b", conf.pop("bootstrap.servers")]
    for name, value in conf.items():
        options += ["-X", f"{name}={value}"]
    lines = b"".join(b"line-%d\n" % i for i in range(100))
    produced = subprocess.run(
        [kcat, "-P", "-t", topic, *options], input=lines, capture_output=True, timeout=BOUND_S
    )
    assert produced.returncode == 0, produced.stderr
    consumed = subprocess.run(
        [kcat, "-C", "-t", topic, "-o", "beginning", "-e", "-q", *options],
        capture_output=True,
        timeout=BOUND_S,
    )
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout == lines


def _python_ssl_context(certs: Certs) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(certs.ca))


def test_kafka_python_produces_and_consumes_over_sasl_ssl_with_scram_sha_256(
    sasl_broker: tuple[BrokerProcess, dict[str, int]], module_certs: Certs
) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    ports = sasl_broker[1]
    bootstrap = f"127.0.0.1:{ports['SASL_SSL']}"
    create_topic(librdkafka(ports, module_certs, "SCRAM-SHA-256", "carol"), "sasl-kafka-python")
    security = {
        "security_protocol": "SASL_SSL",
        "ssl_context": _python_ssl_context(module_certs),
        "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_plain_username": "carol",
        "sasl_plain_password": "carol-secret",
    }
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", **security)
    futures = [producer.send("sasl-kafka-python", b"kp-%d" % i, partition=0) for i in range(200)]
    producer.flush(BOUND_S)
    assert [f.get(BOUND_S).offset for f in futures] == list(range(200))
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, **security)
    tp = TopicPartition("sasl-kafka-python", 0)
    consumer.assign([tp])
    consumer.seek(tp, 0)
    got: list[bytes] = []
    for _ in range(BOUND_S):
        for batch in consumer.poll(timeout_ms=1000).values():
            got.extend(m.value for m in batch)
        if len(got) >= 200:
            break
    consumer.close()
    assert got == [b"kp-%d" % i for i in range(200)]


def test_aiokafka_produces_and_consumes_over_sasl_ssl_with_scram_sha_512(
    sasl_broker: tuple[BrokerProcess, dict[str, int]], module_certs: Certs
) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    ports = sasl_broker[1]
    bootstrap = f"127.0.0.1:{ports['SASL_SSL']}"
    create_topic(librdkafka(ports, module_certs, "SCRAM-SHA-512", "bob"), "sasl-aiokafka")

    async def scenario() -> list[bytes]:
        security = {
            "security_protocol": "SASL_SSL",
            "ssl_context": _python_ssl_context(module_certs),
            "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_plain_username": "bob",
            "sasl_plain_password": "bob-secret",
        }
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", **security)
        await producer.start()
        for i in range(200):
            await producer.send_and_wait("sasl-aiokafka", b"ak-%d" % i, partition=0)
        await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, **security)
        await consumer.start()
        tp = TopicPartition("sasl-aiokafka", 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        got: list[bytes] = []
        for _ in range(BOUND_S):
            data = await consumer.getmany(tp, timeout_ms=1000)
            got.extend(m.value for m in data.get(tp, []))
            if len(got) >= 200:
                break
        await consumer.stop()
        return got

    assert asyncio.run(scenario()) == [b"ak-%d" % i for i in range(200)]


def test_epochlogs_client_produces_and_consumes_over_sasl_ssl(
    sasl_broker: tuple[BrokerProcess, dict[str, int]], module_certs: Certs, tmp_path: Path
) -> None:
    from epochlog.client import Consumer, Producer

    conf = librdkafka(sasl_broker[1], module_certs, "SCRAM-SHA-512", "bob")
    create_topic(conf, "sasl-epochlog")
    producer = Producer(conf)
    for i in range(300):
        producer.produce("sasl-epochlog", b"el-%d" % i)
    assert producer.flush(BOUND_S)
    producer.close()
    consumer = Consumer({**conf, "auto.offset.reset": "earliest"})
    consumer.assign([("sasl-epochlog", 0)])
    got: list[bytes] = []
    for _ in range(BOUND_S):
        got.extend(r.value for r in consumer.poll(1.0))
        if len(got) >= 300:
            break
    consumer.close()
    assert got == [b"el-%d" % i for i in range(300)]
