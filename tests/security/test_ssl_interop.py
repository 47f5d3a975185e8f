"""Real clients against a real broker process whose SSL listener asks for client
certificates (ssl.client.auth=required): confluent-kafka, kcat, kafka-python and
aiokafka each produce and read back over TLS; the process refuses at startup what it
cannot honour, naming the setting."""

from __future__ import annotations

import asyncio
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from epochlog.tools.local_ports import free_port
from support.broker import BrokerProcess, epochlog_command
from support.certs import Certs, make_certs, ssl_listener_settings

pytestmark = pytest.mark.interop

BOUND_S = 120


@pytest.fixture(scope="module")
def module_certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def ssl_broker(
    tmp_path_factory: pytest.TempPathFactory, module_certs: Certs
) -> Iterator[tuple[BrokerProcess, int]]:
    """A broker with a PLAINTEXT listener (the harness's readiness probe) and an SSL
    one; yields it with the SSL port."""
    base = tmp_path_factory.mktemp("ssl-broker")
    broker = BrokerProcess(base / "logs", base, ssl_listener_settings(module_certs))
    ssl_port = free_port()
    broker.settings["listeners"] = f"PLAINTEXT://127.0.0.1:{broker.port},SSL://127.0.0.1:{ssl_port}"
    broker.start()
    yield broker, ssl_port
    try:
        broker.stop()
    finally:
        broker.close()


def librdkafka_ssl(certs: Certs, port: int) -> dict[str, str]:
    return {
        "bootstrap.servers": f"127.0.0.1:{port}",
        "security.protocol": "SSL",
        "ssl.ca.location": str(certs.ca),
        "ssl.certificate.location": str(certs.client_cert),
        "ssl.key.location": str(certs.client_key),
    }


def create_topic(conf: dict[str, str], name: str) -> None:
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(name, 1, 1)], operation_timeout=30)[name].result(60)


def test_confluent_kafka_produces_and_consumes_over_ssl_with_a_client_certificate(
    ssl_broker: tuple[BrokerProcess, int], module_certs: Certs
) -> None:
    conf = librdkafka_ssl(module_certs, ssl_broker[1])
    create_topic(conf, "ssl-confluent")
    producer = ck.Producer({**conf, "acks": "all", "enable.idempotence": True})
    values = [b"value-%d" % i for i in range(500)]
    for i, value in enumerate(values):
        producer.produce("ssl-confluent", value=value, key=b"%d" % i)
    assert producer.flush(BOUND_S) == 0
    consumer = ck.Consumer({**conf, "group.id": "ssl-readers", "auto.offset.reset": "earliest"})
    consumer.subscribe(["ssl-confluent"])
    got: list[bytes] = []
    for _ in range(BOUND_S):
        for message in consumer.consume(1000, 1.0):
            assert message.error() is None, message.error()
            got.append(message.value())
        if len(got) >= len(values):
            break
    consumer.close()
    assert got == values


def test_kcat_produces_and_consumes_over_ssl(
    ssl_broker: tuple[BrokerProcess, int], module_certs: Certs, kcat: str
) -> None:
    conf = librdkafka_ssl(module_certs, ssl_broker[1])
    create_topic(conf, "ssl-kcat")
    options = ["-b", conf["bootstrap.servers"], "-X", "security.protocol=ssl"]
    for name in ("ssl.ca.location", "ssl.certificate.location", "ssl.key.location"):
        options += ["-X", f"{name}={conf[name]}"]
    lines = b"".join(b"line-%d\n" % i for i in range(100))
    produced = subprocess.run(
        [kcat, "-P", "-t", "ssl-kcat", *options], input=lines, capture_output=True, timeout=BOUND_S
    )
    assert produced.returncode == 0, produced.stderr
    consumed = subprocess.run(
        [kcat, "-C", "-t", "ssl-kcat", "-o", "beginning", "-e", "-q", *options],
        capture_output=True,
        timeout=BOUND_S,
    )
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout == lines
    refused = subprocess.run(
        [kcat, "-L", "-b", conf["bootstrap.servers"], "-X", "security.protocol=ssl",
         "-X", f"ssl.ca.location={conf['ssl.ca.location']}", "-m", "5"],
        capture_output=True,
        timeout=BOUND_S,
    )  # fmt: skip
    assert refused.returncode != 0, "a client without a certificate was served"


def _python_ssl_context(certs: Certs) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(certs.ca))
    context.load_cert_chain(str(certs.client_cert), str(certs.client_key))
    return context


def test_kafka_python_produces_and_consumes_over_ssl(
    ssl_broker: tuple[BrokerProcess, int], module_certs: Certs
) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    bootstrap = f"127.0.0.1:{ssl_broker[1]}"
    create_topic(librdkafka_ssl(module_certs, ssl_broker[1]), "ssl-kafka-python")
    security = {"security_protocol": "SSL", "ssl_context": _python_ssl_context(module_certs)}
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", **security)
    futures = [producer.send("ssl-kafka-python", b"kp-%d" % i, partition=0) for i in range(200)]
    producer.flush(BOUND_S)
    assert [f.get(BOUND_S).offset for f in futures] == list(range(200))
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, **security)
    tp = TopicPartition("ssl-kafka-python", 0)
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


def test_aiokafka_produces_and_consumes_over_ssl(
    ssl_broker: tuple[BrokerProcess, int], module_certs: Certs
) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    bootstrap = f"127.0.0.1:{ssl_broker[1]}"
    create_topic(librdkafka_ssl(module_certs, ssl_broker[1]), "ssl-aiokafka")

    async def scenario() -> list[bytes]:
        security = {"security_protocol": "SSL", "ssl_context": _python_ssl_context(module_certs)}
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", **security)
        await producer.start()
        for i in range(200):
            await producer.send_and_wait("ssl-aiokafka", b"ak-%d" % i, partition=0)
        await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, **security)
        await consumer.start()
        tp = TopicPartition("ssl-aiokafka", 0)
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


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        (
            {"listeners": "SASL_SSL://127.0.0.1:0", "inter.broker.listener.name": "SASL_SSL"},
            "ssl.keystore.location: listener SASL_SSL is SSL and needs a keystore",
        ),
        ({"sasl.enabled.mechanisms": "GSSAPI"}, "sasl.enabled.mechanisms: GSSAPI is not supported"),
        (
            {"authorizer.class.name": "AclAuthorizer"},
            "authorizer.class.name: 'AclAuthorizer' is not an authorizer this broker has",
        ),
        (
            {"listeners": "SSL://127.0.0.1:0", "inter.broker.listener.name": "SSL"},
            "ssl.keystore.location: listener SSL is SSL and needs a keystore",
        ),
        (
            {
                "listeners": "SSL://127.0.0.1:0",
                "inter.broker.listener.name": "SSL",
                "ssl.keystore.location": "/nonexistent/broker.pem",
            },
            "ssl.keystore.location: cannot read /nonexistent/broker.pem",
        ),
    ],
)
def test_the_broker_process_refuses_to_start_naming_the_setting(
    tmp_path: Path, settings: dict[str, str], expected: str
) -> None:
    command = epochlog_command() + ["broker", "--log-dirs", str(tmp_path / "logs")]
    for key, value in settings.items():
        command += ["--set", f"{key}={value}"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=BOUND_S)
    assert result.returncode == 2, result.stderr
    assert f"epochlog broker: {expected}" in result.stderr
    assert not (tmp_path / "logs" / "metastore.db").exists(), "it started before refusing"
