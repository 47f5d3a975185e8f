"""A broker's settings, from a server.properties file, flags and ``--set``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from epochlog.security.authorizer import check_class_name, parse_super_users
from epochlog.security.listeners import (
    Listener,
    Listeners,
    parse_endpoint,
    split_security_settings,
)
from epochlog.security.principal import PrincipalMapper
from epochlog.settings.broker import BROKER
from epochlog.settings.registry import SettingError, Settings

RULES = "ssl.principal.mapping.rules"


def parse_properties(text: str) -> dict[str, str]:
    """Java-properties subset: ``key=value`` or ``key: value`` lines, ``#``/``!`` comments."""
    props: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        sep = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if sep < 0:
            raise ValueError(f"properties line without '=': {raw!r}")
        props[line[:sep].strip()] = line[sep + 1 :].strip()
    return props


# Names under these a broker would otherwise only warn of and ignore (ZooKeeper's TLS,
# SASL and znode ACLs included: the metastore link has none of them).
SECURITY_PREFIXES = (
    "ssl.",
    "sasl.",
    "authorizer.",
    "security.",
    "principal.builder.",
    "zookeeper.ssl.",
    "zookeeper.sasl.",
    "zookeeper.set.acl",
)
# Of those, settings that only switch a feature on: "false" asks for nothing unhonoured.
SWITCHES = ("zookeeper.set.acl", "zookeeper.ssl.client.enable")


class BrokerConfig:
    """A broker's settings, parsed once against the registry (epochlog.settings.broker):
    a bad value stops the broker at startup, naming the setting; an unknown name is
    kept in ``unknown`` for the broker to warn of at startup, as Kafka does, unless it
    is a security setting: one the broker would ignore must stop it, never downgrade."""

    def __init__(
        self,
        settings: Settings,
        listener_overrides: Mapping[str, Mapping[str, Any]] | None = None,
        unknown: tuple[str, ...] = (),
    ) -> None:
        self.settings = settings
        self.unknown = unknown
        # listener.name.<name>.ssl.* and .sasl.* by listener name, each value parsed.
        self.listener_overrides = dict(listener_overrides or {})
        if not self.log_dirs:
            raise SettingError("log.dirs", "at least one log directory is required")
        self.listeners = Listeners.from_settings(settings)
        for name in self.listener_overrides:
            if name not in {listener.name for listener in self.listeners.served}:
                raise SettingError(f"listener.name.{name.lower()}", f"{name} is not in listeners")
        # Each listener's ssl.principal.mapping.rules (its own, or the broker's).
        self.principal_mappers = {
            listener.name: PrincipalMapper.parse(*self.listener_setting(listener.name, RULES))
            for listener in self.listeners.served
        }
        self.metrics_listener  # noqa: B018 - parses and so validates the setting
        self.authorizer_enabled = check_class_name(settings["authorizer.class.name"])
        self.super_users = parse_super_users(settings["super.users"])

    @classmethod
    def from_mapping(cls, given: Mapping[str, object]) -> BrokerConfig:
        """Settings as given, with the ``listener.name.<l>.*`` overrides parsed for
        each listener; names no broker setting has are set aside in ``unknown``."""
        plain, overrides = split_security_settings(given)
        parsed = {
            listener: {
                # <mechanism>.sasl.jaas.config is a sasl.jaas.config for one mechanism.
                name: BROKER.check(
                    "sasl.jaas.config" if name.endswith(".sasl.jaas.config") else name, value
                )
                for name, value in values.items()
                if value is not None
            }
            for listener, values in overrides.items()
        }
        unknown = tuple(sorted(name for name in plain if name not in BROKER))
        for name in unknown:
            switched_off = name in SWITCHES and str(plain[name]).strip().lower() == "false"
            if name.startswith(SECURITY_PREFIXES) and not switched_off:
                raise SettingError(
                    name, "not a security setting epochlog knows, so it cannot be honoured"
                )
        known = {name: value for name, value in plain.items() if name in BROKER}
        return cls(BROKER.parse(known), parsed, unknown)

    def listener_setting(self, listener: str, name: str) -> tuple[Any, str]:
        """(value, name to report) of a setting a listener may override."""
        overrides = self.listener_overrides.get(listener, {})
        if name in overrides:
            return overrides[name], f"listener.name.{listener.lower()}.{name}"
        return self.settings[name], name

    def __getitem__(self, name: str) -> Any:
        """A setting's typed value."""
        return self.settings[name]

    @property
    def broker_id(self) -> int:
        return int(self.settings["broker.id"])

    @property
    def log_dirs(self) -> list[str]:
        dirs = self.settings["log.dirs"] or self.settings["log.dir"]
        return [d.strip() for d in dirs.split(",") if d.strip()]

    @property
    def metrics_listener(self) -> Listener | None:
        """Where Prometheus scrapes ``/metrics``; None when not served."""
        spec = self.settings["metrics.listener"]
        if not spec:
            return None
        name, host, port = parse_endpoint("metrics.listener", spec)
        if name != "HTTP":
            raise SettingError("metrics.listener", f"expected http://HOST:PORT, got {spec!r}")
        return Listener(name, host, port)

    @property
    def rack(self) -> str | None:
        return self.settings["broker.rack"] or None
