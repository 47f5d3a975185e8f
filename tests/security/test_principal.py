"""Mutual TLS: a client certificate's subject becomes the connection's principal through
ssl.principal.mapping.rules (Kafka's syntax and examples); no certificate is ANONYMOUS."""

from __future__ import annotations

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from epochlog.security.listeners import Listener
from epochlog.security.principal import ANONYMOUS, PrincipalMapper, subject_name
from epochlog.security.session import AuthenticationFailed, Session, open_session
from support.certs import CLIENT_SUBJECT, Certs

# Kafka's documentation example (docs/security.html, "Customizing SSL User Name").
KAFKA_RULES = (
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,"
    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"
    "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,"
    "DEFAULT"
)


@pytest.mark.parametrize(
    ("subject", "principal"),
    [
        ("CN=serviceuser,OU=ServiceUsers,O=Unknown,L=Unknown,ST=Unknown,C=Unknown", "serviceuser"),
        ("CN=adminUser,OU=Admin,O=Unknown,L=Unknown,ST=Unknown,C=Unknown", "adminuser@admin"),
        ("CN=Some.User,O=Unknown", "some.user"),
        ("OU=NoName,O=Unknown", "OU=NoName,O=Unknown"),
    ],
)
def test_kafkas_documented_rules_map_subjects_as_kafka_does(subject: str, principal: str) -> None:
    assert PrincipalMapper.parse(KAFKA_RULES).principal(subject) == f"User:{principal}"


def test_rules_upper_case_escape_and_refuse_when_none_matches() -> None:
    mapper = PrincipalMapper.parse(r"RULE:^CN=([^,]*),OU=a\/b.*$/$1\/x/U")
    assert mapper.principal("CN=joe,OU=a/b,O=c") == "User:JOE/X"
    assert mapper.principal("CN=joe,OU=other") is None


class CertConnection:
    peer = "127.0.0.1:5555"

    def __init__(self, certificate: bytes | None) -> None:
        self.peer_certificate = certificate


def _der(path: object) -> bytes:
    cert = x509.load_pem_x509_certificate(path.read_bytes())  # type: ignore[attr-defined]
    return cert.public_bytes(serialization.Encoding.DER)


def test_a_verified_client_certificate_is_the_sessions_principal(certs: Certs) -> None:
    ssl_listener = Listener("SSL", "127.0.0.1", 9093, "SSL")
    der = _der(certs.client_cert)
    assert subject_name(der) == CLIENT_SUBJECT
    default = PrincipalMapper.parse("DEFAULT")
    assert open_session(CertConnection(der), ssl_listener, default) == Session(  # type: ignore[arg-type]
        "SSL", "SSL", f"User:{CLIENT_SUBJECT}", "127.0.0.1:5555"
    )
    short = PrincipalMapper.parse("RULE:^CN=([^,]*),.*$/$1/")
    assert open_session(CertConnection(der), ssl_listener, short).principal == "User:client"  # type: ignore[arg-type]
    plaintext = Listener("PLAINTEXT", "127.0.0.1", 9092)
    assert open_session(CertConnection(None), plaintext, short).principal == ANONYMOUS  # type: ignore[arg-type]
    strict = PrincipalMapper.parse("RULE:^CN=admin,.*$/admin/")
    with pytest.raises(AuthenticationFailed, match="no ssl.principal.mapping.rules rule matches"):
        open_session(CertConnection(der), ssl_listener, strict)  # type: ignore[arg-type]
