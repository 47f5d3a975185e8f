"""A broker serving a PLAINTEXT and an SSL listener at once, in process on loopback:
epochlog's own client over TLS with a client certificate (Fetch's file ranges read and
written through TLS), Metadata per listener, and each peer TLS must refuse."""

from __future__ import annotations

import asyncio
import socket
import ssl
import struct
from pathlib import Path
from typing import Any

import pytest
from inprocess_broker import run, running_broker
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest

from epochlog.broker.broker import Broker
from epochlog.client import AsyncConsumer, AsyncProducer
from epochlog.client.admin import AsyncAdmin
from epochlog.client.connection import BrokerConnection
from epochlog.client.security import client_network
from epochlog.seams.socket_stream import StreamConnection
from support.certs import KEY_PASSWORD, Certs, ssl_listener_settings

TWO_LISTENERS = {
    "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
}


def broker_settings(certs: Certs, client_auth: str = "required") -> dict[str, str]:
    return {**TWO_LISTENERS, **ssl_listener_settings(certs, client_auth)}


def ssl_client(broker: Broker, certs: Certs, cert: Path | None = None, key: Path | None = None):
    """Client settings for the SSL listener (with a client certificate when given)."""
    conf = {
        "bootstrap.servers": f"127.0.0.1:{broker.ports['SSL']}",
        "security.protocol": "SSL",
        "ssl.ca.location": str(certs.ca),
    }
    if cert is not None and key is not None:
        conf |= {"ssl.certificate.location": str(cert), "ssl.key.location": str(key)}
    return conf


async def ssl_connection(broker: Broker, conf: dict[str, Any]) -> BrokerConnection:
    network = client_network(
        {
            "security.protocol": "ssl",
            "ssl.ca.location": conf["ssl.ca.location"],
            "ssl.certificate.location": conf.get("ssl.certificate.location", ""),
            "ssl.key.location": conf.get("ssl.key.location", ""),
            "ssl.key.password": "",
            "ssl.endpoint.identification.algorithm": "https",
        },
        broker.seams,
    )
    return await BrokerConnection.open(network, "127.0.0.1", broker.ports["SSL"])


async def advertised_ports(conn: BrokerConnection) -> list[int]:
    answer = await conn.send(MetadataRequest(topics=None, allow_auto_topic_creation=False), 12)
    return [b.port for b in answer.brokers]


def test_epochlogs_client_round_trips_over_ssl_with_a_client_certificate(
    tmp_path: Path, certs: Certs, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The process remembers a loop without native sendfile; this test starts with none
    # seen, so the check at its end is about its own TLS traffic.
    monkeypatch.setattr(StreamConnection, "_native_sendfile", True)

    async def scenario() -> None:
        async with running_broker(tmp_path, **broker_settings(certs)) as broker:
            conf = ssl_client(broker, certs, certs.client_cert, certs.client_key)
            admin = AsyncAdmin(conf, broker.seams)
            await admin.create_topic("secure", partitions=1, replication_factor=1)
            producer = AsyncProducer({**conf, "linger.ms": 5}, broker.seams)
            values = [b"record-%d-" % i + b"x" * 3000 for i in range(400)]
            futures = [
                await producer.send("secure", v, key=b"%d" % i) for i, v in enumerate(values)
            ]
            assert await producer.flush(30)
            assert [f.result().offset for f in futures] == list(range(len(values)))
            await producer.close()
            consumer = AsyncConsumer({**conf, "auto.offset.reset": "earliest"}, broker.seams)
            consumer.assign([("secure", 0)])
            got: list[Any] = []
            for _ in range(200):
                got.extend(await consumer.poll(200))
                if len(got) >= len(values):
                    break
            # Over 1 MB of records came back through the TLS fallback of the file sends.
            assert [r.value for r in got] == values
            await consumer.close()
            await admin.close()
        # Plaintext connections keep sending file ranges with sendfile.
        assert StreamConnection._native_sendfile

    run(scenario)


def test_metadata_on_each_listener_advertises_that_listeners_endpoints(
    tmp_path: Path, certs: Certs
) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path, **broker_settings(certs, "none")) as broker:
            plain = await BrokerConnection.open(
                broker.seams.network, "127.0.0.1", broker.ports["PLAINTEXT"]
            )
            secure = await ssl_connection(broker, ssl_client(broker, certs))
            assert await advertised_ports(plain) == [broker.ports["PLAINTEXT"]]
            assert await advertised_ports(secure) == [broker.ports["SSL"]]
            await plain.close()
            await secure.close()

    run(scenario)


def _plaintext_api_versions(port: int) -> bytes:
    """ApiVersions v0 in clear to a TLS port: what the broker sends back (nothing)."""
    body = struct.pack(">hhih", 18, 0, 7, 4) + b"test"
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(struct.pack(">i", len(body)) + body)
        received = b""
        try:
            while chunk := s.recv(4096):
                received += chunk
        except ConnectionResetError:
            pass
        return received


def test_plaintext_bytes_to_the_ssl_port_are_dropped_and_the_broker_serves_on(
    tmp_path: Path, certs: Certs
) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path, **broker_settings(certs)) as broker:
            port = broker.ports["SSL"]
            answer = await asyncio.get_running_loop().run_in_executor(
                None, _plaintext_api_versions, port
            )
            # No Kafka response: at most a TLS alert record (content type 21) before close.
            assert answer == b"" or answer[0] == 21
            conn = await ssl_connection(
                broker, ssl_client(broker, certs, certs.client_cert, certs.client_key)
            )
            versions = await conn.send(ApiVersionsRequest(), 3)
            assert versions.error_code == 0
            await conn.close()

    run(scenario)


@pytest.mark.parametrize("which", ["untrusted", "expired", "none"])
def test_a_client_certificate_the_truststore_does_not_accept_is_refused(
    tmp_path: Path, certs: Certs, which: str
) -> None:
    pair = {
        "untrusted": (certs.untrusted_cert, certs.untrusted_key),
        "expired": (certs.expired_cert, certs.expired_key),
        "none": (None, None),
    }[which]

    async def scenario() -> None:
        async with running_broker(tmp_path, **broker_settings(certs)) as broker:
            conf = ssl_client(broker, certs, *pair)
            # With TLS 1.3 the client learns of the refusal at its first read.
            with pytest.raises((ssl.SSLError, ConnectionError)):
                conn = await ssl_connection(broker, conf)
                await conn.send(ApiVersionsRequest(), 3)
            good = await ssl_connection(
                broker, ssl_client(broker, certs, certs.client_cert, certs.client_key)
            )
            assert (await good.send(ApiVersionsRequest(), 3)).error_code == 0
            await good.close()

    run(scenario)


def test_a_client_refuses_a_broker_its_ca_does_not_trust(tmp_path: Path, certs: Certs) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path, **broker_settings(certs, "none")) as broker:
            conf = {**ssl_client(broker, certs), "ssl.ca.location": str(certs.other_ca)}
            with pytest.raises(ssl.SSLCertVerificationError):
                await ssl_connection(broker, conf)

    run(scenario)


def test_describe_configs_reports_keys_and_passwords_as_sensitive_without_values(
    tmp_path: Path, certs: Certs
) -> None:
    from kafka.protocol.admin import DescribeConfigsRequest

    settings = {
        **TWO_LISTENERS,
        "ssl.keystore.certificate.chain": certs.server_chain.read_text(),
        "ssl.keystore.key": certs.server_key_encrypted.read_text(),
        "ssl.key.password": KEY_PASSWORD,
    }

    async def scenario() -> None:
        async with running_broker(tmp_path, **settings) as broker:
            conn = await BrokerConnection.open(broker.seams.network, "127.0.0.1", broker.port)
            resource = DescribeConfigsRequest.DescribeConfigsResource(
                resource_type=4,
                resource_name="0",
                configuration_keys=["ssl.keystore.key", "ssl.key.password", "ssl.client.auth"],
            )
            answer = await conn.send(
                DescribeConfigsRequest(
                    resources=[resource], include_synonyms=True, include_documentation=False
                ),
                4,
            )
            described = {c.name: c for c in answer.results[0].configs}
            for secret in ("ssl.keystore.key", "ssl.key.password"):
                assert described[secret].is_sensitive
                assert described[secret].value is None
                assert all(s.value is None for s in described[secret].synonyms)
            assert not described["ssl.client.auth"].is_sensitive
            assert described["ssl.client.auth"].value == "none"
            await conn.close()

    run(scenario)


def test_ssl_enabled_protocols_bounds_the_tls_versions_the_listener_accepts(
    tmp_path: Path, certs: Certs
) -> None:
    settings = {**broker_settings(certs, "none"), "ssl.enabled.protocols": "TLSv1.3"}

    async def handshake(port: int, version: ssl.TLSVersion) -> str:
        context = ssl.create_default_context(cafile=str(certs.ca))
        context.maximum_version = version
        _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context)
        negotiated = writer.get_extra_info("ssl_object").version()
        writer.close()
        return negotiated

    async def scenario() -> None:
        async with running_broker(tmp_path, **settings) as broker:
            port = broker.ports["SSL"]
            assert await handshake(port, ssl.TLSVersion.TLSv1_3) == "TLSv1.3"
            # The broker refuses the handshake (UNSUPPORTED_PROTOCOL) and closes.
            with pytest.raises((ssl.SSLError, ConnectionResetError)):
                await handshake(port, ssl.TLSVersion.TLSv1_2)

    run(scenario)


@pytest.mark.parametrize("algorithm", ["https", "none"])
def test_the_client_checks_the_certificate_names_the_broker_unless_told_not_to(
    tmp_path: Path, certs: Certs, algorithm: str
) -> None:
    # The listener presents a certificate issued for "client", not for 127.0.0.1.
    settings = {
        **TWO_LISTENERS,
        "ssl.keystore.certificate.chain": certs.client_cert.read_text(),
        "ssl.keystore.key": certs.client_key.read_text(),
    }

    async def scenario() -> None:
        async with running_broker(tmp_path, **settings) as broker:
            conf = {
                **ssl_client(broker, certs),
                "ssl.endpoint.identification.algorithm": algorithm,
            }
            admin = AsyncAdmin({**conf, "request.timeout.ms": 3000}, broker.seams)
            if algorithm == "https":
                with pytest.raises((ssl.SSLCertVerificationError, ConnectionError, TimeoutError)):
                    await admin.describe_cluster([])
            else:
                assert list((await admin.describe_cluster([])).brokers) == [0]
            await admin.close()

    run(scenario)


def test_each_request_carries_its_listener_and_the_certificates_principal(
    tmp_path: Path, certs: Certs
) -> None:
    from epochlog.broker.handlers import Handler
    from epochlog.protocol.apis import ApiKey
    from epochlog.security.session import Session

    settings = {
        **broker_settings(certs, "requested"),
        "ssl.principal.mapping.rules": "RULE:^CN=([^,]*),OU=tests,.*$/$1/U,DEFAULT",
    }
    seen: list[Session] = []

    async def scenario() -> None:
        async with running_broker(tmp_path, **settings) as broker:
            channel = broker.request_channel
            original = channel._handlers[ApiKey.API_VERSIONS]

            async def recording(*args: Any) -> Any:
                seen.append(args[-1])
                return await original.handle(*args)

            channel._handlers[ApiKey.API_VERSIONS] = Handler(original.api, recording)
            for conf in (
                ssl_client(broker, certs, certs.client_cert, certs.client_key),
                ssl_client(broker, certs),  # requested, not required: none is presented
            ):
                conn = await ssl_connection(broker, conf)
                await conn.send(ApiVersionsRequest(), 3)
                await conn.close()
            plain = await BrokerConnection.open(
                broker.seams.network, "127.0.0.1", broker.ports["PLAINTEXT"]
            )
            await plain.send(ApiVersionsRequest(), 3)
            await plain.close()

    run(scenario)
    assert [(s.listener, s.security_protocol, s.principal) for s in seen] == [
        ("SSL", "SSL", "User:CLIENT"),
        ("SSL", "SSL", "User:ANONYMOUS"),
        ("PLAINTEXT", "PLAINTEXT", "User:ANONYMOUS"),
    ]


def _client_hello() -> bytes:
    """The first flight of a real TLS client (its ClientHello record)."""
    context = ssl.create_default_context()
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_hostname="localhost")
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    return outgoing.read()


def _send_and_drain(port: int, payload: bytes) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=15) as s:
        s.sendall(payload)
        s.shutdown(socket.SHUT_WR)
        try:
            while s.recv(4096):
                pass
        except ConnectionResetError:
            pass


def test_random_and_truncated_handshakes_leave_the_broker_serving(
    tmp_path: Path, certs: Certs
) -> None:
    import random

    rng = random.Random(12)
    hello = _client_hello()
    payloads = [bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 2048))) for _ in range(20)]
    payloads += [hello[: rng.randint(1, len(hello) - 1)] for _ in range(20)]
    # A well-formed TLS record header announcing far more than follows.
    payloads += [b"\x16\x03\x01\xff\xff" + hello[5:], b"\x16\x03\x03\x00\x00"]

    async def scenario() -> None:
        async with running_broker(tmp_path, **broker_settings(certs)) as broker:
            loop = asyncio.get_running_loop()
            for payload in payloads:
                await loop.run_in_executor(None, _send_and_drain, broker.ports["SSL"], payload)
            conn = await ssl_connection(
                broker, ssl_client(broker, certs, certs.client_cert, certs.client_key)
            )
            assert (await conn.send(ApiVersionsRequest(), 3)).error_code == 0
            await conn.close()

    run(scenario)
