"""What each SASL listener accepts and what this broker presents to the others, from
Kafka's settings, checked at startup: a mechanism without the JAAS entry it needs
(PLAIN's users, the inter-broker username and password) stops the broker, naming the
setting, rather than failing every client later."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from epochlog.security.jaas import PLAIN_MODULE, SCRAM_MODULE, JaasConfig, parse_jaas
from epochlog.security.listeners import Listeners
from epochlog.security.sasl import PLAIN, Lookup, SaslServerConfig
from epochlog.security.sasl_client import SaslCredentials
from epochlog.settings.registry import SettingError

# (value, the name to report) of a setting a listener may override.
ListenerSetting = Callable[[str, str], tuple[Any, str]]


def _jaas(
    listener: str,
    mechanism: str,
    overrides: Mapping[str, Any],
    broker_wide: str,
) -> tuple[JaasConfig | None, str]:
    """The JAAS entry for ``mechanism`` on ``listener``: Kafka's
    ``listener.name.<listener>.<mechanism>.sasl.jaas.config``, else ``sasl.jaas.config``
    when its login module is that mechanism's."""
    module = PLAIN_MODULE if mechanism == PLAIN else SCRAM_MODULE
    key = f"{mechanism.lower()}.sasl.jaas.config"
    if key in overrides:
        name = f"listener.name.{listener.lower()}.{key}"
        config = parse_jaas(name, str(overrides[key]))
        if config.module != module:
            raise SettingError(name, f"{mechanism} needs the login module {module}")
        return config, name
    if broker_wide:
        config = parse_jaas("sasl.jaas.config", broker_wide)
        if config.module == module:
            return config, "sasl.jaas.config"
    return None, f"listener.name.{listener.lower()}.{key}"


def sasl_servers(
    listeners: Listeners,
    setting: ListenerSetting,
    overrides: Mapping[str, Mapping[str, Any]],
    broker_wide: Mapping[str, Any],
    lookup: Lookup,
) -> dict[str, SaslServerConfig]:
    """Each SASL listener's mechanisms, PLAIN users and session bound."""
    servers = {}
    for listener in (item for item in listeners.served if item.is_sasl):
        enabled, enabled_name = setting(listener.name, "sasl.enabled.mechanisms")
        if not enabled:
            raise SettingError(enabled_name, f"listener {listener.name} needs a mechanism")
        plain_users: dict[str, str] = {}
        if PLAIN in enabled:
            jaas, jaas_name = _jaas(
                listener.name,
                PLAIN,
                overrides.get(listener.name, {}),
                broker_wide["sasl.jaas.config"],
            )
            plain_users = jaas.plain_users() if jaas else {}
            if not plain_users:
                raise SettingError(
                    jaas_name,
                    f'PLAIN is enabled on {listener.name} but no user_<name>="<password>" '
                    f"of {PLAIN_MODULE} is set",
                )
        servers[listener.name] = SaslServerConfig(
            listener.name,
            tuple(enabled),
            plain_users,
            lookup,
            reauth_ms=setting(listener.name, "connections.max.reauth.ms")[0],
            max_receive_size=broker_wide["sasl.server.max.receive.size"],
        )
    return servers


def inter_broker_credentials(
    listeners: Listeners,
    servers: Mapping[str, SaslServerConfig],
    overrides: Mapping[str, Mapping[str, Any]],
    broker_wide: Mapping[str, Any],
) -> SaslCredentials | None:
    """What this broker authenticates with on the others' inter-broker listener, when
    that listener is SASL: ``sasl.mechanism.inter.broker.protocol`` (enabled there) and
    the username and password of that listener's JAAS entry for it."""
    server = servers.get(listeners.inter_broker)
    if server is None:
        return None
    mechanism = broker_wide["sasl.mechanism.inter.broker.protocol"]
    if mechanism not in server.enabled:
        raise SettingError(
            "sasl.mechanism.inter.broker.protocol",
            f"{mechanism} is not enabled on the inter-broker listener {listeners.inter_broker}"
            f" ({', '.join(server.enabled)})",
        )
    jaas, name = _jaas(
        listeners.inter_broker,
        mechanism,
        overrides.get(listeners.inter_broker, {}),
        broker_wide["sasl.jaas.config"],
    )
    found = jaas.credentials() if jaas else None
    if found is None:
        raise SettingError(
            name, f"the inter-broker listener uses {mechanism}: its username and password"
        )
    return SaslCredentials(mechanism, *found)
