"""A broker with PLAINTEXT, SASL_PLAINTEXT and SASL_SSL listeners, in process on
loopback: epochlog's own client authenticates with PLAIN and SCRAM, SCRAM users are
managed with AlterUserScramCredentials and followed by the broker, and every refusal
is Kafka's: a wrong password, an unknown mechanism, a request before authentication,
an expired session (KIP-368), oversized and garbage tokens."""

from __future__ import annotations

import asyncio
import logging
import random
import struct
from pathlib import Path
from typing import Any

import pytest
from inprocess_broker import batch, run
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from epochlog.broker.broker import Broker
from epochlog.broker.config import BrokerConfig
from epochlog.client import AsyncConsumer, AsyncProducer
from epochlog.client.admin import AsyncAdmin
from epochlog.client.config import ADMIN, parse_config
from epochlog.client.connection import BrokerConnection
from epochlog.client.errors import TopicPartition
from epochlog.client.security import client_network
from epochlog.protocol.errors import ErrorCode
from epochlog.seams.real import real_seams
from epochlog.security.sasl_client import SaslAuthenticationError
from support.certs import Certs, ssl_listener_settings
from support.requests import produce_request

PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";'
)


def sasl_broker_config(log_dir: Path, certs: Certs, **extra: str) -> BrokerConfig:
    return BrokerConfig.from_mapping(
        {
            "broker.id": "0",
            "log.dirs": str(log_dir),
            "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,"
            "SASL_SSL://127.0.0.1:0",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
            "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
            **ssl_listener_settings(certs, "none"),
            **extra,
        }
    )


class SaslBroker:
    def __init__(self, broker: Broker, certs: Certs) -> None:
        self.broker = broker
        self.certs = certs

    def client(self, mechanism: str, user: str, password: str, tls: bool = True) -> dict[str, Any]:
        listener = "SASL_SSL" if tls else "SASL_PLAINTEXT"
        conf = {
            "bootstrap.servers": f"127.0.0.1:{self.broker.ports[listener]}",
            "security.protocol": listener.lower(),
            "sasl.mechanism": mechanism,
            "sasl.username": user,
            "sasl.password": password,
        }
        return conf | ({"ssl.ca.location": str(self.certs.ca)} if tls else {})

    def plaintext(self) -> dict[str, Any]:
        return {"bootstrap.servers": f"127.0.0.1:{self.broker.ports['PLAINTEXT']}"}


async def with_broker(tmp_path: Path, certs: Certs, scenario: Any, **extra: str) -> Any:
    broker = Broker(sasl_broker_config(tmp_path, certs, **extra), real_seams(seed=1))
    await broker.start()
    try:
        return await scenario(SaslBroker(broker, certs))
    finally:
        await broker.stop()


async def round_trip(sb: SaslBroker, conf: dict[str, Any], topic: str) -> list[bytes]:
    admin = AsyncAdmin(conf, sb.broker.seams)
    await admin.create_topic(topic, partitions=1, replication_factor=1)
    await admin.close()
    producer = AsyncProducer({**conf, "linger.ms": 5}, sb.broker.seams)
    values = [b"%s-%d" % (topic.encode(), i) for i in range(300)]
    futures = [await producer.send(topic, v) for v in values]
    assert await producer.flush(30)
    assert [f.result().offset for f in futures] == list(range(len(values)))
    await producer.close()
    consumer = AsyncConsumer({**conf, "auto.offset.reset": "earliest"}, sb.broker.seams)
    consumer.assign([(topic, 0)])
    got: list[bytes] = []
    for _ in range(200):
        got.extend(r.value for r in await consumer.poll(200))
        if len(got) >= len(values):
            break
    await consumer.close()
    assert got == values
    return got


def test_epochlogs_client_produces_and_consumes_with_plain_and_scram(
    tmp_path: Path, certs: Certs
) -> None:
    async def scenario(sb: SaslBroker) -> None:
        admin = AsyncAdmin(sb.plaintext(), sb.broker.seams)
        await admin.upsert_scram_credential("bob", "SCRAM-SHA-512", "bob-secret")
        await admin.upsert_scram_credential("carol", "SCRAM-SHA-256", "carol-secret", 8192)
        assert await admin.describe_scram_credentials() == {
            "bob": {"SCRAM-SHA-512": 4096},
            "carol": {"SCRAM-SHA-256": 8192},
        }
        await admin.close()
        await round_trip(sb, sb.client("SCRAM-SHA-512", "bob", "bob-secret"), "scram512")
        await round_trip(sb, sb.client("SCRAM-SHA-256", "carol", "carol-secret"), "scram256")
        await round_trip(sb, sb.client("PLAIN", "alice", "alice-secret", tls=False), "plain")

    run(lambda: with_broker(tmp_path, certs, scenario))


async def sasl_ssl_connection(sb: SaslBroker, conf: dict[str, Any]) -> BrokerConnection:
    """A connection to the SASL_SSL listener, authenticated as ``conf`` says."""
    network = client_network(parse_config(conf, ADMIN), sb.broker.seams)
    return await BrokerConnection.open(network, "127.0.0.1", sb.broker.ports["SASL_SSL"])


async def raw_connection(sb: SaslBroker) -> BrokerConnection:
    """A connection to the SASL_PLAINTEXT listener that has not authenticated."""
    port = sb.broker.ports["SASL_PLAINTEXT"]
    return await BrokerConnection.open(sb.broker.seams.network, "127.0.0.1", port)


async def handshake(conn: BrokerConnection, mechanism: str) -> Any:
    return await conn.send(SaslHandshakeRequest(mechanism=mechanism), 1)


async def token(conn: BrokerConnection, data: bytes, version: int = 1) -> Any:
    return await conn.send(SaslAuthenticateRequest(auth_bytes=data), version)


async def assert_closed(conn: BrokerConnection) -> None:
    """The broker closed the connection: the next request finds it gone."""
    with pytest.raises(ConnectionError):
        await conn.send(ApiVersionsRequest(), 0)
    await conn.close()


async def log_end(sb: SaslBroker, topic: str) -> int:
    admin = AsyncAdmin(sb.plaintext(), sb.broker.seams)
    try:
        answer = (await admin.list_offsets({(topic, 0): -1}))[TopicPartition(topic, 0)]
        assert answer is not None
        return answer.offset
    finally:
        await admin.close()


def test_refusals_are_kafkas_and_the_connection_is_closed(tmp_path: Path, certs: Certs) -> None:
    async def scenario(sb: SaslBroker) -> None:
        admin = AsyncAdmin(sb.plaintext(), sb.broker.seams)
        await admin.upsert_scram_credential("bob", "SCRAM-SHA-512", "bob-secret")
        await admin.create_topic("guarded", partitions=1, replication_factor=1)
        await admin.close()

        # A wrong PLAIN password: SASL_AUTHENTICATION_FAILED with a message, then closed.
        conn = await raw_connection(sb)
        assert (await handshake(conn, "PLAIN")).error_code == ErrorCode.NONE
        answer = await token(conn, b"\0alice\0wrong")
        assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert answer.error_message == "Authentication failed: Invalid username or password"
        await assert_closed(conn)

        # A wrong SCRAM password, through epochlog's client.
        wrong = sb.client("SCRAM-SHA-512", "bob", "not-bobs")
        with pytest.raises(SaslAuthenticationError, match="SASL_AUTHENTICATION_FAILED"):
            await sasl_ssl_connection(sb, wrong)
        # A user without a credential for that mechanism fails the same way.
        with pytest.raises(SaslAuthenticationError, match="SASL_AUTHENTICATION_FAILED"):
            await sasl_ssl_connection(sb, sb.client("SCRAM-SHA-256", "bob", "bob-secret"))

        # An unknown mechanism: UNSUPPORTED_SASL_MECHANISM with the enabled ones, closed.
        conn = await raw_connection(sb)
        answer = await handshake(conn, "GSSAPI")
        assert answer.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
        assert answer.mechanisms == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        await assert_closed(conn)

        # A Produce before authentication: closed, nothing appended.
        conn = await raw_connection(sb)
        assert (await conn.send(ApiVersionsRequest(), 0)).error_code == ErrorCode.NONE
        with pytest.raises(ConnectionError):
            await conn.send(produce_request("guarded", batch([b"sneaked"]), acks=1), 7)
        await conn.close()
        conn = await raw_connection(sb)
        with pytest.raises(ConnectionError):
            await conn.send(MetadataRequest(topics=None, allow_auto_topic_creation=False), 12)
        await conn.close()
        assert await log_end(sb, "guarded") == 0

        # A SaslAuthenticate before any handshake: ILLEGAL_SASL_STATE, closed.
        conn = await raw_connection(sb)
        assert (await token(conn, b"\0alice\0alice-secret")).error_code == (
            ErrorCode.ILLEGAL_SASL_STATE
        )
        await assert_closed(conn)

        # The broker still serves an authenticated client, as alice.
        conf = sb.client("PLAIN", "alice", "alice-secret", tls=False)
        await round_trip(sb, conf, "after-refusals")

    run(lambda: with_broker(tmp_path, certs, scenario))


def test_kip_368_a_session_is_renewed_by_re_authentication_and_closed_when_it_expires(
    tmp_path: Path, certs: Certs
) -> None:
    lifetime_ms = 2000
    metadata = MetadataRequest(topics=None, allow_auto_topic_creation=False)

    async def scenario(sb: SaslBroker) -> None:
        conn = await raw_connection(sb)
        assert (await handshake(conn, "PLAIN")).error_code == ErrorCode.NONE
        answer = await token(conn, b"\0alice\0alice-secret")
        assert (answer.error_code, answer.session_lifetime_ms) == (ErrorCode.NONE, lifetime_ms)
        await conn.send(metadata, 12)
        # Re-authenticated before each expiry, the connection lives past several.
        for _ in range(3):
            await sb.broker.seams.clock.sleep(0.4 * lifetime_ms / 1000)
            assert (await handshake(conn, "PLAIN")).error_code == ErrorCode.NONE
            answer = await token(conn, b"\0alice\0alice-secret", version=2)
            assert answer.session_lifetime_ms == lifetime_ms
            await sb.broker.seams.clock.sleep(0.4 * lifetime_ms / 1000)
            await conn.send(metadata, 12)
        # Left to expire, it is closed at its next request.
        await sb.broker.seams.clock.sleep(1.1 * lifetime_ms / 1000)
        with pytest.raises(ConnectionError):
            await conn.send(metadata, 12)
        await conn.close()

        # Re-authentication may not change the principal, nor the mechanism.
        conn = await raw_connection(sb)
        await handshake(conn, "PLAIN")
        await token(conn, b"\0alice\0alice-secret")
        await handshake(conn, "PLAIN")
        answer = await token(conn, b"\0admin\0admin-secret")
        assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert "Cannot change principals during re-authentication" in answer.error_message
        await assert_closed(conn)
        conn = await raw_connection(sb)
        await handshake(conn, "PLAIN")
        await token(conn, b"\0alice\0alice-secret")
        assert (await handshake(conn, "SCRAM-SHA-256")).error_code == ErrorCode.ILLEGAL_SASL_STATE
        await assert_closed(conn)

    run(
        lambda: with_broker(
            tmp_path,
            certs,
            scenario,
            **{"listener.name.sasl_plaintext.connections.max.reauth.ms": str(lifetime_ms)},
        )
    )


def test_epochlogs_client_re_authenticates_before_its_sessions_end(
    tmp_path: Path, certs: Certs, caplog: pytest.LogCaptureFixture
) -> None:
    lifetime_ms = 1500

    async def scenario(sb: SaslBroker) -> None:
        conf = sb.client("SCRAM-SHA-512", "bob", "bob-secret", tls=False)
        admin = AsyncAdmin(sb.plaintext(), sb.broker.seams)
        await admin.upsert_scram_credential("bob", "SCRAM-SHA-512", "bob-secret")
        await admin.create_topic("renewed", partitions=1, replication_factor=1)
        await admin.close()
        producer = AsyncProducer({**conf, "linger.ms": 0}, sb.broker.seams)
        offsets = []
        with caplog.at_level(logging.INFO, logger="epochlog.server"):
            # A record every 100 ms across three session lifetimes.
            for i in range(45):
                future = await producer.send("renewed", b"r-%d" % i)
                assert await producer.flush(30)
                offsets.append(future.result().offset)
                await sb.broker.seams.clock.sleep(0.1)
        await producer.close()
        assert offsets == list(range(45))
        messages = [r.getMessage() for r in caplog.records]
        assert any("re-authenticated as User:bob (SCRAM-SHA-512)" in m for m in messages)
        assert not [m for m in messages if "expired" in m]

    run(
        lambda: with_broker(
            tmp_path,
            certs,
            scenario,
            **{"listener.name.sasl_plaintext.connections.max.reauth.ms": str(lifetime_ms)},
        )
    )


async def send_raw(sb: SaslBroker, data: bytes) -> bytes:
    """Send bytes on a fresh SASL_PLAINTEXT connection, close our side for writing, and
    return whatever the broker answered before it closed."""
    reader, writer = await asyncio.open_connection("127.0.0.1", sb.broker.ports["SASL_PLAINTEXT"])
    writer.write(data)
    await writer.drain()
    writer.write_eof()
    answer = await reader.read()
    writer.close()
    return answer


def framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def request_frame(request: Any, version: int) -> bytes:
    request.with_header(correlation_id=7, client_id="fuzz")
    return framed(bytes(request.encode(version=version, header=True)))


def test_a_fuzz_of_the_sasl_handshake_leaves_the_broker_serving(
    tmp_path: Path, certs: Certs, caplog: pytest.LogCaptureFixture
) -> None:
    rng = random.Random(12)
    plain = request_frame(SaslHandshakeRequest(mechanism="PLAIN"), 1)
    scram = request_frame(SaslHandshakeRequest(mechanism="SCRAM-SHA-512"), 1)
    plain_v0 = request_frame(SaslHandshakeRequest(mechanism="PLAIN"), 0)

    def authenticate(data: bytes) -> bytes:
        return request_frame(SaslAuthenticateRequest(auth_bytes=data), 1)

    cases = [
        *(rng.randbytes(rng.randint(1, 300)) for _ in range(20)),  # random bytes
        *(plain[: rng.randint(1, len(plain) - 1)] for _ in range(10)),  # truncated handshakes
        struct.pack(">i", 524289) + b"x" * 100,  # above sasl.server.max.receive.size
        struct.pack(">i", -5),
        plain + authenticate(rng.randbytes(500_000)),  # an oversized token
        plain + authenticate(b"\0" * 3),
        scram + authenticate(rng.randbytes(200)),  # garbage client-first
        scram + authenticate(b"n,,n=bob,r=" + b"\xff" * 40),
        scram + authenticate(b"n,,n=bob,r=abc") + authenticate(b"c=biws,r=abc,p=AAAA"),
        plain_v0 + framed(rng.randbytes(64)),  # a v0 handshake, then a raw garbage token
        plain_v0 + framed(b"\0alice\0wrong"),
        *(scram + authenticate(rng.randbytes(40))[: rng.randint(5, 40)] for _ in range(5)),
    ]

    async def scenario(sb: SaslBroker) -> None:
        with caplog.at_level(logging.INFO, logger="epochlog.server"):
            for data in cases:
                await send_raw(sb, data)
        # None of them authenticated.
        assert not [r for r in caplog.records if "authenticated as" in r.getMessage()]
        # A v0 handshake with a good raw PLAIN token authenticates (tokens framed bare).
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", sb.broker.ports["SASL_PLAINTEXT"]
        )
        writer.write(plain_v0 + framed(b"\0alice\0alice-secret"))
        await writer.drain()
        handshake_answer = await reader.readexactly(
            struct.unpack(">i", await reader.readexactly(4))[0]
        )
        assert (
            SaslHandshakeResponse.decode(handshake_answer, version=0, header=True).error_code == 0
        )
        assert await reader.readexactly(4) == struct.pack(">i", 0)  # PLAIN's empty reply
        writer.write(request_frame(MetadataRequest(topics=[], allow_auto_topic_creation=False), 1))
        await writer.drain()
        size = struct.unpack(">i", await reader.readexactly(4))[0]
        assert size > 0
        writer.close()
        await round_trip(sb, sb.client("PLAIN", "alice", "alice-secret"), "after-fuzz")

    run(lambda: with_broker(tmp_path, certs, scenario))
