"""The Spark source and sink on an SSL-only listener with a client certificate: the
``kafka.``-prefixed options reach every client the connector makes (the readers, the
driver's leader view, the sink's producers and its transactions' admin), as Spark's
Kafka connector passes them through."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from test_exactly_once_sink import read_committed

from epochlog.client import Producer
from epochlog.tools.local_ports import free_port
from support.broker import BrokerProcess
from support.certs import make_certs, ssl_listener_settings
from support.clients import create_topic


@pytest.fixture(scope="module")
def ssl_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, dict]]:
    """A broker with PLAINTEXT (the harness's probe and the test's own checks) and SSL
    listeners; yields it and the Spark options for its SSL listener."""
    base = tmp_path_factory.mktemp("spark-ssl")
    certs = make_certs(base / "certs")
    broker = BrokerProcess(base / "logs", base, ssl_listener_settings(certs))
    ssl_port = free_port()
    broker.settings["listeners"] = f"PLAINTEXT://127.0.0.1:{broker.port},SSL://127.0.0.1:{ssl_port}"
    options = {
        "kafka.bootstrap.servers": f"127.0.0.1:{ssl_port}",
        "kafka.security.protocol": "SSL",
        "kafka.ssl.ca.location": str(certs.ca),
        "kafka.ssl.certificate.location": str(certs.client_cert),
        "kafka.ssl.key.location": str(certs.client_key),
    }
    broker.start()
    try:
        yield broker, options
    finally:
        broker.close()


def test_read_and_write_exactly_once_over_ssl(
    spark: SparkSession, ssl_broker: tuple[BrokerProcess, dict], tmp_path: Path
) -> None:
    broker, options = ssl_broker
    create_topic(broker.bootstrap, "ssl-in", 2)
    create_topic(broker.bootstrap, "ssl-out", 2)
    values = [b"r%d" % i for i in range(500)]
    with Producer({"bootstrap.servers": broker.bootstrap}) as producer:
        for i, value in enumerate(values):
            producer.produce("ssl-in", value, key=b"k%d" % i)
        assert producer.flush(60)

    read = spark.read.format("epochlog").options(**options).option("subscribe", "ssl-in").load()
    rows = read.select("value").collect()
    assert sorted(r.value for r in rows) == sorted(values)

    (
        read.select("key", "value")
        .write.format("epochlog")
        .options(**options)
        .option("topic", "ssl-out")
        .option("deliveryGuarantee", "exactly-once")
        .mode("append")
        .save()
    )
    assert sorted(read_committed(broker.bootstrap, "ssl-out", 2)) == sorted(values)
