"""The config APIs on BROKER resources, and what DescribeConfigs reports of any
setting: its value, its source and the chain of synonyms down to its default, in
Kafka's order (by level: this broker's dynamic settings, the cluster-wide default's,
the file's, the default; then by synonym, ``log.retention.ms`` before ``.hours``).

A broker resource is named by the broker's id (only the broker asked may answer for
itself, as in Kafka, where admin clients send it there) or is the empty name of the
cluster-wide default; altering one writes that level of the dynamic settings
(``epochlog.broker.dynamic_configs``), refusing settings that cannot change while
brokers run as Kafka refuses them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kafka.protocol.admin import DescribeConfigsResponse

from epochlog.broker.dynamic_configs import Change, DynamicBrokerConfigs
from epochlog.broker.handlers.context import HandlerContext
from epochlog.protocol.errors import ErrorCode, KafkaError
from epochlog.settings.broker import BROKER as BROKER_SETTINGS
from epochlog.settings.dynamic import (
    CLUSTER_DEFAULT,
    DEFAULT_CONFIG,
    DYNAMIC,
    DYNAMIC_BROKER_CONFIG,
    DYNAMIC_DEFAULT_BROKER_CONFIG,
    STATIC_BROKER_CONFIG,
    DynamicRefused,
    check_dynamic,
    synonyms_of,
)
from epochlog.settings.registry import ConfigType, Setting, SettingError

Chain = list[tuple[str, str | None, int]]


@dataclass(frozen=True)
class Described:
    """One setting as DescribeConfigs reports it; ``synonyms`` (each in its own unit) run
    from the one in force down to the default, as Kafka lists them."""

    setting: Setting
    value: str | None
    synonyms: Chain
    read_only: bool

    def entry(self, with_synonyms: bool, with_documentation: bool) -> Any:
        source = self.synonyms[0][2]
        result = DescribeConfigsResponse.DescribeConfigsResult.DescribeConfigsResourceResult
        # Keys and passwords are reported as set or not, never with their value (Kafka).
        sensitive = self.setting.kind.config_type == ConfigType.PASSWORD
        return result(
            name=self.setting.name,
            value=None if sensitive else self.value,
            read_only=self.read_only,
            config_source=source,
            is_default=source == DEFAULT_CONFIG,
            is_sensitive=sensitive,
            synonyms=[
                result.DescribeConfigsSynonym(name=n, value=None if sensitive else v, source=s)
                for n, v, s in self.synonyms
            ]
            if with_synonyms
            else [],
            config_type=int(self.setting.kind.config_type),
            documentation=self.setting.doc if with_documentation else None,
        )


def setting_text(setting: Setting, value: object) -> str | None:
    """A value as Kafka writes it, None for none."""
    return None if value is None else setting.kind.render(value)


def broker_chain(dynamic: DynamicBrokerConfigs, names: list[str], per_broker: bool = True) -> Chain:
    """Where the broker settings ``names`` are set, level by level, then the first
    one's default (``per_broker``: with this broker's own dynamic level)."""
    levels = [(dynamic.default, DYNAMIC_DEFAULT_BROKER_CONFIG)]
    if per_broker:
        levels.insert(0, (dynamic.own, DYNAMIC_BROKER_CONFIG))
    chain: Chain = [
        (n, configs[n], source) for configs, source in levels for n in names if n in configs
    ]
    static = dynamic.static
    chain += [(n, static.text(n), STATIC_BROKER_CONFIG) for n in names if n in static.given]
    defaults = [n for n in names if BROKER_SETTINGS.default(n) is not None]
    if defaults:
        first = BROKER_SETTINGS[defaults[0]]
        default = setting_text(first, BROKER_SETTINGS.default(first.name))
        chain.append((first.name, default, DEFAULT_CONFIG))
    return chain


def _broker_entry(dynamic: DynamicBrokerConfigs, setting: Setting, per_broker: bool) -> Described:
    chain = broker_chain(dynamic, synonyms_of(setting.name), per_broker)
    # As Kafka: the chain starts at the setting itself (a .hours setting does not show
    # the .ms one above it).
    names = [n for n, _, _ in chain]
    chain = chain[names.index(setting.name) :] if setting.name in names else []
    if not chain:
        chain = [(setting.name, None, DEFAULT_CONFIG)]
    value = chain[0][1] if not per_broker else setting_text(setting, dynamic.settings[setting.name])
    return Described(setting, value, chain, read_only=setting.name not in DYNAMIC)


def describe_broker_configs(broker: HandlerContext, name: str) -> list[Described]:
    """This broker's settings in force (``name``: its id), or the cluster-wide default's
    (the empty name): only the settings set there, as Kafka lists them."""
    dynamic = broker.dynamic_configs
    if name == "":
        return [
            _broker_entry(dynamic, BROKER_SETTINGS[n], per_broker=False)
            for n in sorted(dynamic.default)
            if n in BROKER_SETTINGS
        ]
    broker_entity(broker, name)
    return [_broker_entry(dynamic, setting, per_broker=True) for setting in BROKER_SETTINGS]


def broker_entity(broker: HandlerContext, name: str) -> str:
    """The metastore entity of a broker resource; Kafka's INVALID_REQUEST for another
    broker's id or a name that is none."""
    if name == "":
        return CLUSTER_DEFAULT
    if not name.isdigit():
        raise KafkaError(
            ErrorCode.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}"
        )
    if int(name) != broker.broker_id:
        raise KafkaError(
            ErrorCode.INVALID_REQUEST,
            f"Unexpected broker id, expected {broker.broker_id} or empty string, "
            f"but received {name}",
        )
    return name


def _checked(configs: dict[str, str]) -> dict[str, str]:
    try:
        check_dynamic(configs)
    except DynamicRefused as exc:
        raise KafkaError(ErrorCode.INVALID_REQUEST, str(exc)) from None
    except SettingError as exc:
        # A name no broker has, as for topics; a bad value, as Kafka refuses it here.
        known = exc.setting in BROKER_SETTINGS
        code = ErrorCode.INVALID_REQUEST if known else ErrorCode.INVALID_CONFIG
        raise KafkaError(code, str(exc)) from None
    return configs


async def alter_broker_configs(
    broker: HandlerContext, name: str, new_configs: Change, validate_only: bool
) -> None:
    """One level of the dynamic settings becomes ``new_configs(current)``, checked."""
    entity = broker_entity(broker, name)
    await broker.dynamic_configs.alter(
        entity, lambda current: _checked(new_configs(current)), validate_only
    )
