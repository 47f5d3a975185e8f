"""Kafka's listener model: named listeners, each with a security protocol, what each is
advertised as, and which one brokers use between themselves. A setting the broker could
only honour by serving less security than asked for stops it here, naming the setting."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from epochlog.settings.registry import SettingError, Settings
from epochlog.settings.security import SASL_MECHANISMS, SASL_SETTINGS, SSL_SETTINGS

PLAINTEXT = "PLAINTEXT"
SSL = "SSL"
SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
SECURITY_PROTOCOLS = (PLAINTEXT, SSL, *SASL_PROTOCOLS)

# What a listener may override: ssl.*, sasl.* and <mechanism>.sasl.jaas.config.
_PER_LISTENER = frozenset(s.name for s in SSL_SETTINGS + SASL_SETTINGS) | frozenset(
    f"{m.lower()}.sasl.jaas.config" for m in SASL_MECHANISMS
)
_ENDPOINT = re.compile(r"^([A-Za-z0-9_-]+)://(\[[0-9a-fA-F:.]*\]|[^:/\[\]]*):(\d+)$")
_OVERRIDE = re.compile(r"^listener\.name\.([^.]+)\.(.+)$")


@dataclass(frozen=True)
class Listener:
    name: str
    host: str
    port: int
    security_protocol: str = PLAINTEXT

    @property
    def is_tls(self) -> bool:
        return self.security_protocol in (SSL, "SASL_SSL")

    @property
    def is_sasl(self) -> bool:
        return self.security_protocol in SASL_PROTOCOLS


def parse_endpoint(setting: str, spec: str) -> tuple[str, str, int]:
    """``NAME://HOST:PORT`` as (NAME, host, port); an empty host is every interface.
    (Not a URL: listener names such as SASL_SSL are no URL scheme.)"""
    match = _ENDPOINT.match(spec.strip())
    if match is None or int(match.group(3)) > 65535:
        raise SettingError(setting, f"expected NAME://HOST:PORT, got {spec!r}")
    return match.group(1).upper(), match.group(2).strip("[]") or "0.0.0.0", int(match.group(3))


def _endpoints(setting: str, text: str) -> dict[str, tuple[str, int]]:
    found: dict[str, tuple[str, int]] = {}
    for spec in (s for s in text.split(",") if s.strip()):
        name, host, port = parse_endpoint(setting, spec)
        if name in found:
            raise SettingError(setting, f"listener name {name} appears twice")
        found[name] = (host, port)
    return found


def parse_protocol_map(text: str) -> dict[str, str]:
    """``listener.security.protocol.map``: NAME:PROTOCOL pairs."""
    mapping: dict[str, str] = {}
    for pair in (p.strip() for p in text.split(",") if p.strip()):
        name, sep, protocol = pair.partition(":")
        protocol = protocol.strip().upper()
        if not sep or not name.strip() or protocol not in SECURITY_PROTOCOLS:
            raise SettingError(
                "listener.security.protocol.map",
                f"expected NAME:PROTOCOL with PROTOCOL one of {', '.join(SECURITY_PROTOCOLS)},"
                f" got {pair!r}",
            )
        mapping[name.strip().upper()] = protocol
    return mapping


@dataclass(frozen=True)
class Listeners:
    """Every listener this broker serves, what it advertises for each, and the one
    other brokers connect to."""

    served: tuple[Listener, ...]
    advertised: tuple[Listener, ...]
    inter_broker: str

    @classmethod
    def from_settings(cls, settings: Settings) -> Listeners:
        protocols = parse_protocol_map(settings["listener.security.protocol.map"])
        bound = _endpoints("listeners", settings["listeners"])
        if not bound:
            raise SettingError("listeners", "at least one listener is required")
        served = []
        for name, (host, port) in bound.items():
            protocol = protocols.get(name)
            if protocol is None:
                raise SettingError(
                    "listener.security.protocol.map",
                    f"no security protocol for listener {name}",
                )
            served.append(Listener(name, host, port, protocol))
        advertised_at = _endpoints("advertised.listeners", settings["advertised.listeners"])
        for name in advertised_at:
            if name not in bound:
                raise SettingError("advertised.listeners", f"{name} is not in listeners")
        advertised = tuple(
            Listener(listener.name, *advertised_at[listener.name], listener.security_protocol)
            if listener.name in advertised_at
            else listener
            for listener in served
        )
        inter_broker = settings["inter.broker.listener.name"].upper() or PLAINTEXT
        if inter_broker not in bound:
            raise SettingError(
                "inter.broker.listener.name",
                f"{inter_broker} is not one of the listeners ({', '.join(bound)})",
            )
        return cls(tuple(served), advertised, inter_broker)


def split_security_settings(
    given: Mapping[str, object],
) -> tuple[dict[str, object], dict[str, dict[str, object]]]:
    """The settings for the registry, and the per-listener ``listener.name.<name>.ssl.*``
    and ``.sasl.*`` overrides by listener; a setting Kafka has replaced
    (security.inter.broker.protocol) is refused here, naming what replaces it."""
    plain: dict[str, object] = {}
    overrides: dict[str, dict[str, object]] = {}
    for name, value in given.items():
        key = str(name)
        _refuse_unsupported(key)
        match = _OVERRIDE.match(key)
        if match is None:
            plain[key] = value
            continue
        listener, setting = match.group(1).upper(), match.group(2)
        if setting not in _PER_LISTENER:
            raise SettingError(key, f"{setting} cannot be set per listener")
        overrides.setdefault(listener, {})[setting] = value
    return plain, overrides


def _refuse_unsupported(key: str) -> None:
    base = _OVERRIDE.sub(r"\2", key)
    if base == "security.inter.broker.protocol":
        raise SettingError(key, "name the listener with inter.broker.listener.name instead")
