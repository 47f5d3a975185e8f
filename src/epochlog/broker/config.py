"""A broker's settings, from a server.properties file, flags and ``--set``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from epochlog.settings.broker import BROKER
from epochlog.settings.registry import SettingError, Settings


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


@dataclass(frozen=True)
class Listener:
    name: str
    host: str
    port: int

    @classmethod
    def parse(cls, setting: str, spec: str) -> Listener:
        try:
            parts = urlsplit(spec.strip())
            port = parts.port
        except ValueError:
            port = None
        if not parts.scheme or port is None:
            raise SettingError(setting, f"expected NAME://HOST:PORT, got {spec!r}")
        return cls(parts.scheme.upper(), parts.hostname or "0.0.0.0", port)


class BrokerConfig:
    """A broker's settings, parsed once against the registry (epochlog.settings.broker):
    an unknown name or a bad value stops the broker at startup, naming the setting."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        if not self.log_dirs:
            raise SettingError("log.dirs", "at least one log directory is required")
        self.listener  # noqa: B018 - parses and so validates the setting
        self.advertised_listener  # noqa: B018
        self.metrics_listener  # noqa: B018

    @classmethod
    def from_mapping(cls, given: Mapping[str, object]) -> BrokerConfig:
        return cls(BROKER.parse(given))

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
    def listener(self) -> Listener:
        return Listener.parse("listeners", self.settings["listeners"].split(",")[0])

    @property
    def advertised_listener(self) -> Listener:
        advertised = self.settings["advertised.listeners"]
        if advertised:
            return Listener.parse("advertised.listeners", advertised.split(",")[0])
        return self.listener

    @property
    def metrics_listener(self) -> Listener | None:
        """Where Prometheus scrapes ``/metrics``; None when not served."""
        spec = self.settings["metrics.listener"]
        if not spec:
            return None
        listener = Listener.parse("metrics.listener", spec)
        if listener.name != "HTTP":
            raise SettingError("metrics.listener", f"expected http://HOST:PORT, got {spec!r}")
        return listener

    @property
    def rack(self) -> str | None:
        return self.settings["broker.rack"] or None
