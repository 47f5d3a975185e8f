"""epochlog's client takes librdkafka's security settings and reports a mistake at
construction, naming the setting, before any connection is tried."""

from __future__ import annotations

from pathlib import Path

import pytest

from epochlog.client import AsyncProducer
from epochlog.client.errors import ConfigError
from epochlog.seams.real import real_seams
from support.certs import Certs

BOOTSTRAP = {"bootstrap.servers": "127.0.0.1:1"}


def refusal(**given: str) -> str:
    with pytest.raises(ConfigError) as caught:
        AsyncProducer({**BOOTSTRAP, **given}, real_seams())
    return str(caught.value)


def test_mistakes_in_a_clients_security_settings_are_named(tmp_path: Path, certs: Certs) -> None:
    ssl = {"security.protocol": "SSL"}
    assert refusal(**{"security.protocol": "SASL_SSL"}) == (
        "sasl.username: required with security.protocol=sasl_ssl"
    )
    assert refusal(
        **{"security.protocol": "SASL_PLAINTEXT", "sasl.username": "u", "sasl.password": ""}
    ) == ("sasl.password: required with security.protocol=sasl_plaintext")
    assert refusal(**{"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI"}).startswith(
        "sasl.mechanism: 'GSSAPI' is not one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"
    )
    assert refusal(**{"security.protocol": "tls"}).startswith("security.protocol: 'tls' is not")
    missing = tmp_path / "ca.pem"
    assert refusal(**ssl, **{"ssl.ca.location": str(missing)}) == (
        f"ssl.ca.location: cannot read {missing}: No such file or directory"
    )
    assert refusal(**ssl, **{"ssl.certificate.location": str(certs.client_cert)}) == (
        "ssl.key.location: required with its pair"
    )
    assert refusal(
        **ssl,
        **{
            "ssl.certificate.location": str(certs.client_cert),
            "ssl.key.location": str(certs.server_key),
        },
    ) == (
        "ssl.key.location: the key does not belong to the certificate in ssl.certificate.location"
    )
    assert refusal(**{"ssl.endpoint.identification.algorithm": "dns"}).startswith(
        "ssl.endpoint.identification.algorithm: 'dns' is not one of https, none"
    )


def test_a_plaintext_client_reads_no_key_material(tmp_path: Path) -> None:
    # The files are only read with security.protocol=ssl.
    producer = AsyncProducer(
        {**BOOTSTRAP, "ssl.ca.location": str(tmp_path / "absent.pem")}, real_seams()
    )
    assert producer.config["security.protocol"] == "plaintext"
