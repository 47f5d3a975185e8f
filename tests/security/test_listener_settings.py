"""The listener model and the TLS settings as the broker reads them at startup: what it
serves on each listener, and every setting it cannot honour refused, named, before it
opens anything."""

from __future__ import annotations

from pathlib import Path

import pytest

from epochlog.broker.broker import Broker
from epochlog.broker.config import BrokerConfig
from epochlog.seams.real import real_seams
from epochlog.security.listeners import Listener
from epochlog.settings.registry import SettingError
from support.certs import KEY_PASSWORD, Certs

SASL_PLAINTEXT = {"listeners": "PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9093"}
PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret";'
)
SCRAM_JAAS = (
    'org.apache.kafka.common.security.scram.ScramLoginModule required username="a" password="b";'
)


def config(tmp_path: Path, **given: str) -> BrokerConfig:
    return BrokerConfig.from_mapping({"log.dirs": str(tmp_path), **given})


def refusal(tmp_path: Path, **given: str) -> str:
    """The message a broker stops with, at configuration or at construction."""
    with pytest.raises(SettingError) as caught:
        Broker(config(tmp_path, **given), real_seams())
    return str(caught.value)


def test_every_listener_is_served_with_its_protocol_and_advertised_by_name(tmp_path: Path) -> None:
    c = config(
        tmp_path,
        listeners="PLAINTEXT://127.0.0.1:9092, SSL://0.0.0.0:9093,INTERNAL://127.0.0.1:9094",
        **{
            "advertised.listeners": "SSL://broker.example:19093",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,INTERNAL:SSL",
            "inter.broker.listener.name": "internal",
        },
    )
    assert c.listeners.served == (
        Listener("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT"),
        Listener("SSL", "0.0.0.0", 9093, "SSL"),
        Listener("INTERNAL", "127.0.0.1", 9094, "SSL"),
    )
    assert [(a.name, a.host, a.port) for a in c.listeners.advertised] == [
        ("PLAINTEXT", "127.0.0.1", 9092),
        ("SSL", "broker.example", 19093),
        ("INTERNAL", "127.0.0.1", 9094),
    ]
    assert c.listeners.inter_broker == "INTERNAL"


def test_the_inter_broker_listener_defaults_to_plaintext_as_kafka(tmp_path: Path) -> None:
    assert config(tmp_path).listeners.inter_broker == "PLAINTEXT"
    message = refusal(tmp_path, listeners="SSL://127.0.0.1:0")
    assert message.startswith("inter.broker.listener.name: PLAINTEXT is not one of")


def test_a_zookeeper_security_switch_set_to_false_asks_for_nothing(tmp_path: Path) -> None:
    given = {"zookeeper.set.acl": "false", "zookeeper.ssl.client.enable": "False"}
    assert config(tmp_path, **given).unknown == ("zookeeper.set.acl", "zookeeper.ssl.client.enable")


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (
            {"listeners": "SASL_SSL://127.0.0.1:9092", "inter.broker.listener.name": "SASL_SSL"},
            "ssl.keystore.location: listener SASL_SSL is SSL and needs a keystore",
        ),
        (
            {**SASL_PLAINTEXT, "sasl.enabled.mechanisms": "PLAIN"},
            "listener.name.sasl_plaintext.plain.sasl.jaas.config: PLAIN is enabled on "
            'SASL_PLAINTEXT but no user_<name>="<password>"',
        ),
        (
            {
                **SASL_PLAINTEXT,
                "sasl.enabled.mechanisms": "PLAIN",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config": "x",
            },
            "listener.name.sasl_plaintext.plain.sasl.jaas.config: expected '<LoginModule class>",
        ),
        (
            {
                **SASL_PLAINTEXT,
                "sasl.enabled.mechanisms": "PLAIN",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config": SCRAM_JAAS,
            },
            "listener.name.sasl_plaintext.plain.sasl.jaas.config: PLAIN needs the login module "
            "org.apache.kafka.common.security.plain.PlainLoginModule",
        ),
        (
            {
                **SASL_PLAINTEXT,
                "sasl.enabled.mechanisms": "PLAIN",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS + " extra;",
            },
            "listener.name.sasl_plaintext.plain.sasl.jaas.config: exactly one login module",
        ),
        (
            {
                "listeners": "SASL_PLAINTEXT://127.0.0.1:9093",
                "inter.broker.listener.name": "SASL_PLAINTEXT",
                "sasl.enabled.mechanisms": "SCRAM-SHA-256",
            },
            "sasl.mechanism.inter.broker.protocol: SCRAM-SHA-512 is not enabled on the "
            "inter-broker listener SASL_PLAINTEXT (SCRAM-SHA-256)",
        ),
        (
            {
                "listeners": "SASL_PLAINTEXT://127.0.0.1:9093",
                "inter.broker.listener.name": "SASL_PLAINTEXT",
            },
            "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config: the inter-broker "
            "listener uses SCRAM-SHA-512: its username and password",
        ),
        (
            {"sasl.enabled.mechanisms": "GSSAPI"},
            "sasl.enabled.mechanisms: GSSAPI is not supported (only PLAIN, SCRAM-SHA-256, "
            "SCRAM-SHA-512)",
        ),
        (
            {"sasl.mechanism.inter.broker.protocol": "OAUTHBEARER"},
            "sasl.mechanism.inter.broker.protocol: 'OAUTHBEARER' is not one of",
        ),
        (
            {"listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS},
            "listener.name.sasl_ssl: SASL_SSL is not in listeners",
        ),
        (
            {"listeners": "PLAINTEXT://127.0.0.1:9092,OTHER://127.0.0.1:9093"},
            "listener.security.protocol.map: no security protocol for listener OTHER",
        ),
        (
            {"listeners": "PLAINTEXT://127.0.0.1:9092,PLAINTEXT://127.0.0.1:9093"},
            "listeners: listener name PLAINTEXT appears twice",
        ),
        ({"listeners": "127.0.0.1:9092"}, "listeners: expected NAME://HOST:PORT"),
        (
            {"advertised.listeners": "SSL://127.0.0.1:9093"},
            "advertised.listeners: SSL is not in listeners",
        ),
        (
            {"authorizer.class.name": "com.example.MyAuthorizer"},
            "authorizer.class.name: 'com.example.MyAuthorizer' is not an authorizer this broker",
        ),
        ({"super.users": "User:admin;admin"}, "super.users: 'admin' is not of the form User:name"),
        ({"ssl.keystore.type": "JKS"}, "ssl.keystore.type: 'JKS' is not one of PEM"),
        ({"ssl.enabled.protocols": "TLSv1.1"}, "ssl.enabled.protocols: 'TLSv1.1' is not one of"),
        ({"ssl.client.auth": "maybe"}, "ssl.client.auth: 'maybe' is not one of"),
        (
            {"ssl.principal.mapping.rules": "RULE:^CN=(.*$/$1/"},
            "ssl.principal.mapping.rules: bad pattern",
        ),
        (
            {"ssl.principal.mapping.rules": "NOT A RULE"},
            "ssl.principal.mapping.rules: cannot parse the rule at 'NOT A RULE'",
        ),
        (
            {"listener.name.ssl.ssl.client.auth": "required"},
            "listener.name.ssl: SSL is not in listeners",
        ),
        (
            {"listener.name.plaintext.num.partitions": "3"},
            "listener.name.plaintext.num.partitions: num.partitions cannot be set per listener",
        ),
        *(
            ({name: "x"}, f"{name}: not a security setting epochlog knows")
            for name in (
                "ssl.cipher.suites",
                "sasl.server.callback.handler.class",
                "authorizer.acl.cache.size",
                "security.providers",
                "principal.builder.class",
                "zookeeper.ssl.client.enable",
                "zookeeper.set.acl",
            )
        ),
    ],
)
def test_a_setting_the_broker_cannot_honour_stops_it_naming_the_setting(
    tmp_path: Path, given: dict[str, str], expected: str
) -> None:
    assert refusal(tmp_path, **given).startswith(expected)


SSL_ONLY = {"listeners": "SSL://127.0.0.1:0", "inter.broker.listener.name": "SSL"}


def test_an_ssl_listener_without_a_keystore_is_refused(tmp_path: Path) -> None:
    message = refusal(tmp_path, **SSL_ONLY)
    assert message.startswith("ssl.keystore.location: listener SSL is SSL and needs a keystore")


def test_unreadable_or_wrong_pem_files_are_refused_naming_the_setting(
    tmp_path: Path, certs: Certs
) -> None:
    missing = tmp_path / "missing.pem"
    assert (
        refusal(tmp_path, **SSL_ONLY, **{"ssl.keystore.location": str(missing)})
        == f"ssl.keystore.location: cannot read {missing}: No such file or directory"
    )
    assert refusal(
        tmp_path, **SSL_ONLY, **{"ssl.keystore.location": str(certs.server_chain)}
    ).startswith(f"ssl.keystore.location: {certs.server_chain} holds no PEM private key")
    assert refusal(
        tmp_path, **SSL_ONLY, **{"ssl.keystore.location": str(certs.server_key)}
    ).startswith("ssl.keystore.location: no PEM certificate could be read")
    keystore = {"ssl.keystore.location": str(certs.server)}
    assert refusal(
        tmp_path, **SSL_ONLY, **keystore, **{"ssl.truststore.location": str(missing)}
    ).startswith("ssl.truststore.location: cannot read")
    assert refusal(tmp_path, **SSL_ONLY, **keystore, **{"ssl.client.auth": "required"}).startswith(
        "ssl.truststore.location: ssl.client.auth=required on listener SSL needs"
    )


def test_an_inline_key_pair_must_match_and_decrypt(tmp_path: Path, certs: Certs) -> None:
    chain = certs.server_chain.read_text()
    inline = {"ssl.keystore.certificate.chain": chain}
    assert refusal(tmp_path, **SSL_ONLY, **inline) == ("ssl.keystore.key: required with its pair")
    other_key = certs.client_key.read_text()
    assert refusal(tmp_path, **SSL_ONLY, **inline, **{"ssl.keystore.key": other_key}) == (
        "ssl.keystore.key: the key does not belong to the certificate in "
        "ssl.keystore.certificate.chain"
    )
    encrypted = {**inline, "ssl.keystore.key": certs.server_key_encrypted.read_text()}
    assert refusal(tmp_path, **SSL_ONLY, **encrypted).startswith("ssl.key.password: ")
    wrong = {**encrypted, "ssl.key.password": "wrong"}
    assert refusal(tmp_path, **SSL_ONLY, **wrong).startswith(
        "ssl.key.password: cannot decrypt the key"
    )
    broker = Broker(
        config(tmp_path, **SSL_ONLY, **encrypted, **{"ssl.key.password": KEY_PASSWORD}),
        real_seams(),
    )
    assert broker.config.listeners.served[0].is_tls


def test_per_listener_ssl_settings_override_and_are_named_in_refusals(
    tmp_path: Path, certs: Certs
) -> None:
    two = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,INTERNAL://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,INTERNAL:SSL",
        "ssl.keystore.location": str(certs.server),
    }
    message = refusal(
        tmp_path, **two, **{"listener.name.internal.ssl.keystore.location": "/nowhere.pem"}
    )
    assert message.startswith("listener.name.internal.ssl.keystore.location: cannot read")
    broker = Broker(
        config(
            tmp_path,
            **two,
            **{
                "listener.name.internal.ssl.client.auth": "required",
                "listener.name.internal.ssl.truststore.location": str(certs.ca),
            },
        ),
        real_seams(),
    )
    assert broker._listener_tls["INTERNAL"].client_auth == "required"
    assert broker._listener_tls["SSL"].client_auth == "none"


def test_a_listener_may_have_its_own_principal_mapping_rules(tmp_path: Path) -> None:
    two = {"listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0"}
    own = "listener.name.ssl.ssl.principal.mapping.rules"
    c = config(tmp_path, **two, **{own: "RULE:^CN=([^,]*),.*$/$1/"})
    assert c.principal_mappers["SSL"].principal("CN=a,O=b") == "User:a"
    assert c.principal_mappers["PLAINTEXT"].principal("CN=a,O=b") == "User:CN=a,O=b"
    with pytest.raises(SettingError, match=f"^{own}: cannot parse the rule at 'BAD'"):
        config(tmp_path, **two, **{own: "BAD"})
