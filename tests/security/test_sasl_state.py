"""The SASL state machine and Kafka's JAAS text, without a network: what a connection
may send before it authenticates, PLAIN and SCRAM exchanges against credentials derived
as AlterUserScramCredentials derives them, session expiry."""

from __future__ import annotations

import pytest
from scramp import ScramClient

from epochlog.protocol.errors import ErrorCode
from epochlog.security.jaas import PLAIN_MODULE, parse_jaas
from epochlog.security.sasl import SaslRefused, SaslServerConfig
from epochlog.security.scram_credentials import (
    ScramCredential,
    credential_from_salted,
    salted_password,
)
from epochlog.settings.registry import SettingError

PRODUCE, METADATA, API_VERSIONS = 0, 3, 18


def credential(mechanism: str, password: str) -> ScramCredential:
    salt = b"0123456789abcdef"
    return credential_from_salted(
        mechanism, salt, salted_password(mechanism, password, salt, 4096), 4096
    )


CREDENTIALS = {("SCRAM-SHA-512", "bob"): credential("SCRAM-SHA-512", "bob-secret")}
CONFIG = SaslServerConfig(
    "SASL_SSL",
    ("PLAIN", "SCRAM-SHA-512"),
    {"alice": "alice-secret"},
    lambda mechanism, user: CREDENTIALS.get((mechanism, user)),
    reauth_ms=1000,
    max_receive_size=524288,
)


def test_kafkas_jaas_text_is_parsed_with_quotes_escapes_and_bare_values() -> None:
    config = parse_jaas(
        "sasl.jaas.config",
        f'  {PLAIN_MODULE}  required\n username="admin" password="a \\"quoted\\" secret"'
        ' user_admin=bare user_x="semi;colon" ;  ',
    )
    assert config.module == PLAIN_MODULE
    assert config.credentials() == ("admin", 'a "quoted" secret')
    assert config.plain_users() == {"admin": "bare", "x": "semi;colon"}
    for text, problem in [
        (f"{PLAIN_MODULE} mandatory;", "login module flag 'mandatory'"),
        (f'{PLAIN_MODULE} required user_a="x"', "(or no ';')"),
        (f"{PLAIN_MODULE} required; {PLAIN_MODULE} required;", "exactly one login module"),
    ]:
        with pytest.raises(SettingError, match=problem.replace("(", r"\(").replace(")", r"\)")):
            parse_jaas("sasl.jaas.config", text)


def test_nothing_but_the_sasl_apis_before_authentication() -> None:
    auth = CONFIG.authenticator()
    auth.admit(API_VERSIONS, 0)
    with pytest.raises(SaslRefused, match="before SASL authentication completed"):
        auth.admit(PRODUCE, 0)
    assert auth.max_frame() == 524288
    assert auth.handshake("PLAIN", 1) == ErrorCode.NONE
    with pytest.raises(SaslRefused):
        auth.admit(METADATA, 0)  # mid-exchange
    result = auth.authenticate(b"\0alice\0alice-secret", 5_000)
    assert (result.error, result.session_lifetime_ms) == (ErrorCode.NONE, 1000)
    assert (auth.principal, auth.max_frame()) == ("User:alice", None)
    auth.admit(PRODUCE, 5_999)
    with pytest.raises(SaslRefused, match="expired"):
        auth.admit(PRODUCE, 6_000)
    with pytest.raises(SaslRefused, match="expired"):
        auth.admit(17, 6_000)  # too late to begin re-authenticating


@pytest.mark.parametrize(
    ("token", "message"),
    [
        (b"\0alice\0wrong", "Invalid username or password"),
        (b"\0nobody\0alice-secret", "Invalid username or password"),
        (b"admin\0alice\0alice-secret", "authorization id that is different"),
        (b"\0alice", "expected 3 tokens"),
        (b"\0\xff\0x", "not UTF-8"),
    ],
)
def test_plain_refusals(token: bytes, message: str) -> None:
    auth = CONFIG.authenticator()
    auth.handshake("PLAIN", 1)
    result = auth.authenticate(token, 0)
    assert result.error == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert message in (result.message or "")
    assert auth.failed and auth.principal is None


def scram(password: str) -> tuple[ErrorCode, str | None]:
    auth = CONFIG.authenticator()
    assert auth.handshake("SCRAM-SHA-512", 1) == ErrorCode.NONE
    client = ScramClient(["SCRAM-SHA-512"], "bob", password)
    first = auth.authenticate(client.get_client_first().encode(), 0)
    assert first.error == ErrorCode.NONE
    client.set_server_first(first.reply.decode())
    final = auth.authenticate(client.get_client_final().encode(), 0)
    if final.error == ErrorCode.NONE:
        client.set_server_final(final.reply.decode())  # the broker proved it knows the key
    return final.error, auth.principal


def test_scram_against_credentials_derived_from_a_salted_password() -> None:
    assert scram("bob-secret") == (ErrorCode.NONE, "User:bob")
    assert scram("not-bobs") == (ErrorCode.SASL_AUTHENTICATION_FAILED, None)


def test_an_unknown_mechanism_is_refused_with_the_enabled_ones() -> None:
    auth = CONFIG.authenticator()
    assert auth.handshake("SCRAM-SHA-256", 1) == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert (
        auth.failure == "unsupported SASL mechanism 'SCRAM-SHA-256' (enabled: PLAIN, SCRAM-SHA-512)"
    )
