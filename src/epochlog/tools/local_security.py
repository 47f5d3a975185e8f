"""``epochlog up --secure``: what a local cluster needs to serve SASL_SSL only. A CA
and a broker certificate made for this data directory (cryptography; 127.0.0.1 and
localhost), SCRAM-SHA-512 users written into the metastore before any broker starts
(the brokers' own, for the inter-broker listener, and ``admin``), the brokers' settings
in a properties file and a ``client.properties`` that reaches the cluster, both
readable by their owner only: passwords stay out of the process list."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import os
import secrets
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from epochlog.metastore import open_metastore
from epochlog.seams.real import real_seams
from epochlog.security.scram_credentials import (
    MIN_ITERATIONS,
    alter_user,
    credential_for_password,
)

MECHANISM = "SCRAM-SHA-512"
LISTENER = "SASL_SSL"
BROKER_USER, ADMIN_USER = "broker", "admin"
VALID_FOR = datetime.timedelta(days=365)


@dataclass(frozen=True)
class LocalSecurity:
    """Where a secured local cluster's material is, and the settings that use it."""

    folder: str
    ca: str
    broker_properties: str
    client_properties: str
    client: dict[str, str]


def prepare(data_dir: str, metastore: str) -> LocalSecurity:
    """Make (again, with new passwords) the certificates, users and settings files."""
    folder = os.path.join(data_dir, "tls")
    os.makedirs(folder, exist_ok=True)
    ca, keystore = _make_certificates(folder)
    passwords = {BROKER_USER: secrets.token_urlsafe(18), ADMIN_USER: secrets.token_urlsafe(18)}
    asyncio.run(_write_users(metastore, passwords))
    broker = {
        "inter.broker.listener.name": LISTENER,
        "ssl.keystore.location": keystore,
        "ssl.truststore.location": ca,
        "sasl.enabled.mechanisms": MECHANISM,
        "sasl.mechanism.inter.broker.protocol": MECHANISM,
        f"listener.name.{LISTENER.lower()}.{MECHANISM.lower()}.sasl.jaas.config": (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{BROKER_USER}" password="{passwords[BROKER_USER]}";'
        ),
    }
    client = {
        "security.protocol": LISTENER,
        "sasl.mechanism": MECHANISM,
        "sasl.username": ADMIN_USER,
        "sasl.password": passwords[ADMIN_USER],
        "ssl.ca.location": ca,
    }
    broker_properties = _write_private(os.path.join(folder, "broker.properties"), broker)
    client_properties = _write_private(os.path.join(data_dir, "client.properties"), client)
    return LocalSecurity(folder, ca, broker_properties, client_properties, client)


async def _write_users(metastore: str, passwords: dict[str, str]) -> None:
    store = await open_metastore(metastore, real_seams().clock)
    try:
        for user, password in passwords.items():
            credential = credential_for_password(MECHANISM, password, MIN_ITERATIONS)
            await alter_user(store, user, MECHANISM, credential)
    finally:
        await store.close()


def _write_private(path: str, settings: dict[str, str]) -> str:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.writelines(f"{key}={value}\n" for key, value in settings.items())
    return path


def _make_certificates(folder: str) -> tuple[str, str]:
    """``ca.pem`` and ``broker.pem`` (the broker's certificate, then its key)."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "epochlog local CA")])
    ca = (
        _builder(ca_name, ca_name, ca_key.public_key(), now)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, BROKER_USER)])
    names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    usages = [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
    leaf = (
        _builder(name, ca_name, key.public_key(), now)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    ca_path, keystore = os.path.join(folder, "ca.pem"), os.path.join(folder, "broker.pem")
    with open(ca_path, "wb") as f:
        f.write(ca.public_bytes(serialization.Encoding.PEM))
    pem_key = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    fd = os.open(keystore, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(leaf.public_bytes(serialization.Encoding.PEM) + pem_key)
    return ca_path, keystore


def _builder(
    subject: x509.Name, issuer: x509.Name, key: ec.EllipticCurvePublicKey, now: datetime.datetime
) -> x509.CertificateBuilder:
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + VALID_FOR)
    )
