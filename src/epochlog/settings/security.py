"""The broker's listener, TLS, SASL and authorization settings, with Kafka's names
(KIP-103 listeners, KIP-651 PEM keystores, KIP-152/368 SASL, the ACL authorizer's).
What they mean is decided in ``epochlog.security``; what the broker cannot honour (SASL
mechanisms other than PLAIN and SCRAM, an authorizer class other than Kafka's ACL
authorizers) is refused there at startup, never ignored."""

from __future__ import annotations

import dataclasses

from epochlog.settings.registry import (
    BOOLEAN,
    TEXT,
    ConfigType,
    Kind,
    Setting,
    SettingError,
    choice,
    integer,
)

LISTENERS = "Listeners and TLS"
AUTHORIZATION = "Authorization (ACLs)"

TLS_PROTOCOLS = ("TLSv1.2", "TLSv1.3")


def _parse_protocols(name: str, raw: object) -> tuple[str, ...]:
    parts = raw.split(",") if isinstance(raw, str) else raw
    if not isinstance(parts, list | tuple):
        raise SettingError(name, f"expected a comma-separated list, got {raw!r}")
    chosen = []
    for part in (str(p).strip() for p in parts):
        if not part:
            continue
        known = [p for p in TLS_PROTOCOLS if p.lower() == part.lower()]
        if not known:
            raise SettingError(name, f"{part!r} is not one of {', '.join(TLS_PROTOCOLS)}")
        chosen.append(known[0])
    if not chosen:
        raise SettingError(name, "expected at least one protocol")
    return tuple(chosen)


def _parse_secret(name: str, raw: object) -> str:
    if not isinstance(raw, str):
        raise SettingError(name, "expected a string")
    return raw.strip()


PLAIN = "PLAIN"
SASL_MECHANISMS = (PLAIN, "SCRAM-SHA-256", "SCRAM-SHA-512")


def _parse_mechanisms(name: str, raw: object) -> tuple[str, ...]:
    parts = raw.split(",") if isinstance(raw, str) else raw
    if not isinstance(parts, list | tuple):
        raise SettingError(name, f"expected a comma-separated list, got {raw!r}")
    chosen = tuple(str(p).strip().upper() for p in parts if str(p).strip())
    for mechanism in chosen:
        if mechanism not in SASL_MECHANISMS:
            raise SettingError(
                name, f"{mechanism} is not supported (only {', '.join(SASL_MECHANISMS)})"
            )
    return chosen


MECHANISM_LIST = Kind(
    ConfigType.LIST, _parse_mechanisms, "a comma-separated list of " + ", ".join(SASL_MECHANISMS)
)
PROTOCOLS = Kind(ConfigType.LIST, _parse_protocols, "a comma-separated list of TLSv1.2, TLSv1.3")
# DescribeConfigs reports these as sensitive, without their value (as Kafka does).
PASSWORD = Kind(
    ConfigType.PASSWORD, _parse_secret, "a secret", render=lambda v: "[hidden]" if v else ""
)

DEFAULT_PROTOCOL_MAP = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"

# The ssl.* settings a listener may override as listener.name.<listener>.ssl.*.
SSL_SETTINGS = [
    Setting(
        "ssl.keystore.type",
        choice("PEM", case_sensitive=False),
        "PEM",
        "Format of the broker's key and certificate: PEM only (KIP-651; Kafka's default is JKS).",
        LISTENERS,
    ),
    Setting(
        "ssl.keystore.location",
        TEXT,
        "",
        "A PEM file with the broker's private key and its certificate chain.",
        LISTENERS,
    ),
    Setting(
        "ssl.keystore.certificate.chain",
        TEXT,
        "",
        "The certificate chain as PEM text, instead of ssl.keystore.location.",
        LISTENERS,
    ),
    Setting(
        "ssl.keystore.key",
        PASSWORD,
        "",
        "The private key as PEM text, with ssl.keystore.certificate.chain.",
        LISTENERS,
    ),
    Setting("ssl.key.password", PASSWORD, "", "Decrypts an encrypted private key.", LISTENERS),
    Setting(
        "ssl.truststore.type",
        choice("PEM", case_sensitive=False),
        "PEM",
        "Format of the trusted certificates: PEM only.",
        LISTENERS,
    ),
    Setting(
        "ssl.truststore.location",
        TEXT,
        "",
        "A PEM file of the CA certificates trusted for clients' (and other brokers') certificates.",
        LISTENERS,
    ),
    Setting(
        "ssl.truststore.certificates",
        TEXT,
        "",
        "The trusted CA certificates as PEM text, instead of ssl.truststore.location.",
        LISTENERS,
    ),
    Setting(
        "ssl.client.auth",
        choice("required", "requested", "none", case_sensitive=False),
        "none",
        "Whether SSL clients must (required) or may (requested) present a certificate the "
        "truststore trusts; its subject becomes the connection's principal.",
        LISTENERS,
    ),
    Setting(
        "ssl.enabled.protocols",
        PROTOCOLS,
        "TLSv1.2,TLSv1.3",
        "TLS versions accepted and offered.",
        LISTENERS,
    ),
    Setting(
        "ssl.principal.mapping.rules",
        TEXT,
        "DEFAULT",
        "RULE:pattern/replacement/[LU] rules, comma-separated, and DEFAULT (the whole "
        "distinguished name), mapping a client certificate's subject to User:<name>; the "
        "first rule whose pattern matches the whole subject applies.",
        LISTENERS,
    ),
    Setting(
        "ssl.endpoint.identification.algorithm",
        dataclasses.replace(choice("https", "", case_sensitive=False), accepts="https or empty"),
        "https",
        "https: this broker checks another broker's certificate names the host it "
        "connects to; empty: no check.",
        LISTENERS,
    ),
]

# The sasl.* settings a listener may override as listener.name.<listener>.<setting>
# (sasl.jaas.config as listener.name.<listener>.<mechanism>.sasl.jaas.config).
SASL_SETTINGS = [
    Setting(
        "sasl.enabled.mechanisms",
        MECHANISM_LIST,
        "SCRAM-SHA-256,SCRAM-SHA-512",
        "The SASL mechanisms a SASL listener accepts: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 "
        "(Kafka's default, GSSAPI, is not offered).",
        LISTENERS,
    ),
    Setting(
        "sasl.jaas.config",
        PASSWORD,
        "",
        'A JAAS login module entry. PlainLoginModule\'s user_<name>="<password>" options '
        "are the PLAIN users; username and password are what this broker authenticates "
        "with on the inter-broker listener. Usually set per listener and mechanism: "
        "listener.name.<listener>.<mechanism>.sasl.jaas.config.",
        LISTENERS,
    ),
    Setting(
        "connections.max.reauth.ms",
        integer(0),
        0,
        "KIP-368: a SASL session's lifetime; a client must re-authenticate before it ends "
        "or its connection is closed at its next request. 0: sessions never expire.",
        LISTENERS,
    ),
]

SECURITY_SETTINGS = [
    Setting(
        "listeners",
        TEXT,
        "PLAINTEXT://127.0.0.1:9092",
        "Where the broker listens: NAME://HOST:PORT, comma-separated, each name once; the "
        "name's security protocol comes from listener.security.protocol.map. Port 0 picks "
        "a free port.",
        LISTENERS,
    ),
    Setting(
        "advertised.listeners",
        TEXT,
        "",
        "What clients and other brokers are told to connect to, per listener name; a "
        "listener left out is advertised as it listens.",
        LISTENERS,
    ),
    Setting(
        "listener.security.protocol.map",
        TEXT,
        DEFAULT_PROTOCOL_MAP,
        "NAME:PROTOCOL pairs: each listener's security protocol (PLAINTEXT, SSL, "
        "SASL_PLAINTEXT or SASL_SSL).",
        LISTENERS,
    ),
    Setting(
        "inter.broker.listener.name",
        TEXT,
        "",
        "The listener other brokers connect to (replica fetchers, transaction markers); "
        "empty: the one named PLAINTEXT (Kafka's security.inter.broker.protocol default).",
        LISTENERS,
    ),
    *SSL_SETTINGS,
    *SASL_SETTINGS,
    Setting(
        "sasl.mechanism.inter.broker.protocol",
        choice(*SASL_MECHANISMS, case_sensitive=False),
        "SCRAM-SHA-512",
        "The mechanism this broker authenticates with when the inter-broker listener is "
        "SASL (with the username and password of that listener's JAAS config for it).",
        LISTENERS,
    ),
    Setting(
        "sasl.server.max.receive.size",
        integer(1),
        524288,
        "The largest frame a SASL listener reads before the client has authenticated.",
        LISTENERS,
    ),
    Setting(
        "authorizer.class.name",
        TEXT,
        "",
        "Turns ACLs on: kafka.security.authorizer.AclAuthorizer, "
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer and "
        "epochlog.security.authorizer.Authorizer all name epochlog's authorizer; empty: "
        "every client may do everything.",
        AUTHORIZATION,
    ),
    Setting(
        "super.users",
        TEXT,
        "",
        "Principals allowed everything whatever the ACLs say, separated by semicolons "
        "(User:admin;User:broker). The brokers' own principals belong here (or need "
        "ClusterAction on the cluster) so that replication and transaction markers work.",
        AUTHORIZATION,
    ),
    Setting(
        "allow.everyone.if.no.acl.found",
        BOOLEAN,
        "false",
        "Whether a resource with no ACL at all is open to everyone (true) or only to "
        "super users (false, Kafka's default).",
        AUTHORIZATION,
    ),
]
