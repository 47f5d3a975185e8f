"""A client's ``security.protocol`` with librdkafka's names: SSL wraps every connection
the client opens in TLS (``ssl.ca.location`` to trust, ``ssl.certificate.location`` and
``ssl.key.location`` to present, the broker's name checked unless
``ssl.endpoint.identification.algorithm=none``); SASL_PLAINTEXT and SASL_SSL
authenticate every connection with ``sasl.mechanism``, ``sasl.username`` and
``sasl.password`` before anything else is sent on it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from epochlog.client.errors import ConfigError
from epochlog.seams import Network, Seams, Tls, TlsClientNetwork
from epochlog.security.sasl_client import SaslClientNetwork, SaslCredentials
from epochlog.settings.registry import TEXT, Setting, choice
from epochlog.settings.security import PASSWORD, SASL_MECHANISMS

SECURITY = [
    Setting(
        "security.protocol",
        choice("plaintext", "ssl", "sasl_plaintext", "sasl_ssl", case_sensitive=False),
        "plaintext",
        "plaintext, ssl (TLS), sasl_plaintext or sasl_ssl (SASL, over TLS for sasl_ssl).",
    ),
    Setting(
        "sasl.mechanism",
        choice(*SASL_MECHANISMS, case_sensitive=False),
        "PLAIN",
        "The SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (librdkafka's default "
        "GSSAPI is not offered).",
    ),
    Setting("sasl.username", TEXT, "", "The SASL user (sasl_plaintext, sasl_ssl)."),
    Setting("sasl.password", PASSWORD, "", "The SASL user's password."),
    Setting(
        "ssl.ca.location",
        TEXT,
        "",
        "PEM file of the CA certificates the brokers' certificates are checked against; "
        "empty: the system's.",
    ),
    Setting(
        "ssl.certificate.location",
        TEXT,
        "",
        "PEM file of the client's certificate (chain), for brokers that ask for one.",
    ),
    Setting("ssl.key.location", TEXT, "", "PEM file of the client certificate's private key."),
    Setting("ssl.key.password", PASSWORD, "", "Decrypts an encrypted ssl.key.location."),
    Setting(
        "ssl.endpoint.identification.algorithm",
        choice("https", "none", case_sensitive=False),
        "https",
        "https: the broker's certificate must name the host connected to; none: no check.",
    ),
]


def client_tls(config: Mapping[str, Any], seams: Seams) -> Tls | None:
    """The TLS a client connects with, its files read and checked now (a mistake is
    reported at construction, naming the setting); None for plaintext."""
    if config["security.protocol"] not in ("ssl", "sasl_ssl"):
        return None
    # cryptography loads only for TLS users.
    from epochlog.security.tls import certificates, check_key_pair, read_pem

    trusted = b""
    if config["ssl.ca.location"]:
        trusted = read_pem(seams.disk, "ssl.ca.location", config["ssl.ca.location"])
        certificates("ssl.ca.location", trusted)
    chain = key = b""
    certificate, key_location = config["ssl.certificate.location"], config["ssl.key.location"]
    if bool(certificate) != bool(key_location):
        missing = "ssl.key.location" if certificate else "ssl.certificate.location"
        raise ConfigError(missing, "required with its pair")
    if certificate:
        chain = read_pem(seams.disk, "ssl.certificate.location", certificate)
        key = read_pem(seams.disk, "ssl.key.location", key_location)
        check_key_pair(
            "ssl.certificate.location",
            chain,
            "ssl.key.location",
            key,
            ("ssl.key.password", config["ssl.key.password"]),
        )
    return Tls(
        certificate_chain=chain,
        private_key=key,
        key_password=config["ssl.key.password"],
        trusted=trusted,
        check_hostname=config["ssl.endpoint.identification.algorithm"] == "https",
    )


def client_sasl(config: Mapping[str, Any]) -> SaslCredentials | None:
    """The SASL credentials a client authenticates with; None unless a SASL protocol."""
    if not config["security.protocol"].startswith("sasl"):
        return None
    for name in ("sasl.username", "sasl.password"):
        if not config[name]:
            raise ConfigError(
                name, f"required with security.protocol={config['security.protocol']}"
            )
    return SaslCredentials(
        config["sasl.mechanism"], config["sasl.username"], config["sasl.password"]
    )


def client_network(config: Mapping[str, Any], seams: Seams) -> Network:
    """The network a client's connections go through: TLS for every one with SSL or
    SASL_SSL, then SASL authentication with SASL_PLAINTEXT or SASL_SSL."""
    tls = client_tls(config, seams)
    credentials = client_sasl(config)
    network = seams.network if tls is None else TlsClientNetwork(seams.network, tls)
    return network if credentials is None else SaslClientNetwork(network, credentials, seams.clock)
