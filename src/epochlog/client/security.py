"""A client's ``security.protocol`` with librdkafka's names: SSL wraps every connection
the client opens in TLS (``ssl.ca.location`` to trust, ``ssl.certificate.location`` and
``ssl.key.location`` to present, the broker's name checked unless
``ssl.endpoint.identification.algorithm=none``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from epochlog.client.errors import ConfigError
from epochlog.seams import Network, Seams, Tls, TlsClientNetwork
from epochlog.security.tls import certificates, check_key_pair, read_pem
from epochlog.settings.registry import TEXT, Setting, choice
from epochlog.settings.security import PASSWORD

SECURITY = [
    Setting(
        "security.protocol",
        choice("plaintext", "ssl", "sasl_plaintext", "sasl_ssl", case_sensitive=False),
        "plaintext",
        "plaintext or ssl (TLS); SASL is not supported yet.",
    ),
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
    protocol = config["security.protocol"]
    if protocol.startswith("sasl"):
        raise ConfigError("security.protocol", f"{protocol} is not supported yet (no SASL)")
    if protocol != "ssl":
        return None
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


def client_network(config: Mapping[str, Any], seams: Seams) -> Network:
    """The network a client's connections go through: TLS for every one with SSL."""
    tls = client_tls(config, seams)
    return seams.network if tls is None else TlsClientNetwork(seams.network, tls)
