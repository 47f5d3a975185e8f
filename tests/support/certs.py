"""Certificates made by the tests (trustme, on cryptography): a CA, a server certificate
for 127.0.0.1 and localhost, client certificates (good, expired, from an untrusted CA).
Nothing here is committed: every run makes its own keys in a temporary folder."""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path

import trustme

CLIENT_SUBJECT = "CN=client,OU=tests,O=epochlog"
KEY_PASSWORD = "test-password"


@dataclass(frozen=True)
class Certs:
    ca: Path  # the trusted CA's certificate
    server: Path  # the broker's chain and key in one PEM file
    server_chain: Path
    server_key: Path
    server_key_encrypted: Path  # the same key, encrypted with KEY_PASSWORD
    client_cert: Path
    client_key: Path
    expired_cert: Path
    expired_key: Path
    untrusted_cert: Path
    untrusted_key: Path
    other_ca: Path  # the CA of the untrusted client certificate


def _leaf(ca: trustme.CA, folder: Path, name: str, *identities: str, **kwargs: object) -> Path:
    cert = ca.issue_cert(*identities, **kwargs)  # type: ignore[arg-type]
    chain = folder / f"{name}.pem"
    chain.write_bytes(b"".join(blob.bytes() for blob in cert.cert_chain_pems))
    (folder / f"{name}.key").write_bytes(cert.private_key_pem.bytes())
    return chain


def make_certs(folder: Path) -> Certs:
    from cryptography.hazmat.primitives import serialization

    folder.mkdir(parents=True, exist_ok=True)
    ca, other = trustme.CA(), trustme.CA()
    ca.cert_pem.write_to_path(str(folder / "ca.pem"))
    other.cert_pem.write_to_path(str(folder / "other-ca.pem"))
    server_chain = _leaf(ca, folder, "server", "127.0.0.1", "localhost", common_name="broker")
    server_key = folder / "server.key"
    (folder / "server-keystore.pem").write_bytes(
        server_chain.read_bytes() + server_key.read_bytes()
    )
    key = serialization.load_pem_private_key(server_key.read_bytes(), None)
    encrypted = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(KEY_PASSWORD.encode()),
    )
    (folder / "server-encrypted.key").write_bytes(encrypted)
    subject = {"common_name": "client", "organization_name": "epochlog"}
    client = _leaf(ca, folder, "client", "client", organization_unit_name="tests", **subject)
    now = datetime.datetime.now(datetime.UTC)
    expired = _leaf(
        ca,
        folder,
        "expired",
        "client",
        organization_unit_name="tests",
        not_before=now - datetime.timedelta(days=30),
        not_after=now - datetime.timedelta(days=1),
        **subject,
    )
    untrusted = _leaf(
        other, folder, "untrusted", "client", organization_unit_name="tests", **subject
    )
    return Certs(
        ca=folder / "ca.pem",
        server=folder / "server-keystore.pem",
        server_chain=server_chain,
        server_key=server_key,
        server_key_encrypted=folder / "server-encrypted.key",
        client_cert=client,
        client_key=folder / "client.key",
        expired_cert=expired,
        expired_key=folder / "expired.key",
        untrusted_cert=untrusted,
        untrusted_key=folder / "untrusted.key",
        other_ca=folder / "other-ca.pem",
    )


@dataclass(frozen=True)
class UserCerts:
    """A CA, a broker keystore (CN=broker, also its client certificate towards other
    brokers) and one client certificate per user (CN=<user>,OU=tests,O=epochlog)."""

    ca: Path
    server: Path
    users: dict[str, tuple[Path, Path]]  # user -> (certificate, key)


# ssl.principal.mapping.rules that turn CN=<name>,... into User:<name>.
CN_RULES = "RULE:^CN=([^,]+),.*$/$1/,DEFAULT"


def make_user_certs(folder: Path, *users: str) -> UserCerts:
    folder.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(folder / "ca.pem"))
    chain = _leaf(ca, folder, "broker", "127.0.0.1", "localhost", common_name="broker")
    server = folder / "broker-keystore.pem"
    server.write_bytes(chain.read_bytes() + (folder / "broker.key").read_bytes())
    issued = {
        user: (
            _leaf(ca, folder, user, user, common_name=user, organization_unit_name="tests",
                  organization_name="epochlog"),
            folder / f"{user}.key",
        )
        for user in users
    }  # fmt: skip
    return UserCerts(folder / "ca.pem", server, issued)


def ssl_listener_settings(
    certs: Certs | UserCerts, client_auth: str = "required"
) -> dict[str, str]:
    """A broker's settings for an SSL listener with these certificates."""
    return {
        "ssl.keystore.location": str(certs.server),
        "ssl.truststore.location": str(certs.ca),
        "ssl.client.auth": client_auth,
    }
