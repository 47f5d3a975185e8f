"""Settings declared once (Kafka's name, kind, default, documentation) and parsed the
same way wherever they come from: a server.properties file, ``--set``, CreateTopics, a
client's dict. A refusal always reads ``<name>: <problem>``."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, TypeVar

INT_MAX = (1 << 31) - 1
LONG_MAX = (1 << 63) - 1


class SettingError(ValueError):
    """A setting refused; the message starts with the setting's name."""

    def __init__(self, name: str, problem: str) -> None:
        super().__init__(f"{name}: {problem}")
        self.setting = name


class ConfigType(IntEnum):
    """DescribeConfigs' ConfigType (v3+), as Kafka's ConfigDef.Type."""

    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


Parse = Callable[[str, object], Any]


def _render(value: object) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, tuple):
        return ",".join(str(v) for v in value)
    return "" if value is None else str(value)


@dataclass(frozen=True)
class Kind:
    """How a setting's text (or a client's Python value) becomes a value."""

    config_type: ConfigType
    parse: Parse
    accepts: str
    render: Callable[[object], str] = _render


def integer(minimum: int | None = None, maximum: int | None = None, *, long: bool = True) -> Kind:
    """Kafka's INT (32-bit) or LONG (64-bit), bounded."""
    top = LONG_MAX if long else INT_MAX
    high = top if maximum is None else maximum
    low = -top - 1 if minimum is None else minimum

    def parse(name: str, raw: object) -> int:
        if isinstance(raw, bool):
            raise SettingError(name, f"expected an integer, got {raw!r}")
        try:
            value = int(raw.strip() if isinstance(raw, str) else raw)  # type: ignore[call-overload]
        except (TypeError, ValueError):
            raise SettingError(name, f"expected an integer, got {raw!r}") from None
        if not low <= value <= high:
            raise SettingError(name, f"{value} is outside {low}..{high}")
        return value

    if minimum is None:
        accepts = "an integer"
    elif maximum is None:
        accepts = f"an integer ≥ {minimum}"
    else:
        accepts = f"an integer in {minimum}..{maximum}"
    return Kind(ConfigType.LONG if long else ConfigType.INT, parse, accepts)


def _parse_bool(name: str, raw: object) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text not in ("true", "false"):
        raise SettingError(name, f"expected true or false, got {raw!r}")
    return text == "true"


BOOLEAN = Kind(ConfigType.BOOLEAN, _parse_bool, "true or false")


def _parse_text(name: str, raw: object) -> str:
    if not isinstance(raw, str):
        raise SettingError(name, f"expected a string, got {raw!r}")
    return raw.strip()


TEXT = Kind(ConfigType.STRING, _parse_text, "a string")


def choice(*values: str, case_sensitive: bool = True) -> Kind:
    """One of ``values`` (Kafka's ValidString)."""

    def parse(name: str, raw: object) -> str:
        text = _parse_text(name, raw) if isinstance(raw, str) else str(raw)
        for value in values:
            if text == value or (not case_sensitive and text.lower() == value.lower()):
                return value
        raise SettingError(name, f"{raw!r} is not one of {', '.join(values)}")

    return Kind(ConfigType.STRING, parse, "one of " + ", ".join(values))


def number(minimum: float, maximum: float) -> Kind:
    """Kafka's DOUBLE, bounded."""

    def parse(name: str, raw: object) -> float:
        try:
            value = float(raw)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise SettingError(name, f"expected a number, got {raw!r}") from None
        if not minimum <= value <= maximum:
            raise SettingError(name, f"{value} is outside {minimum}..{maximum}")
        return value

    return Kind(ConfigType.DOUBLE, parse, f"a number in {minimum}..{maximum}")


def items(*allowed: str, nonempty: bool = True) -> Kind:
    """Kafka's LIST: comma-separated (or a Python list), optionally from ``allowed``."""

    def parse(name: str, raw: object) -> tuple[str, ...]:
        parts = raw.split(",") if isinstance(raw, str) else raw
        if not isinstance(parts, list | tuple):
            raise SettingError(name, f"expected a comma-separated list, got {raw!r}")
        values = tuple(str(p).strip() for p in parts if str(p).strip())
        if nonempty and not values:
            raise SettingError(name, "expected at least one item")
        if allowed:
            for value in values:
                if value.lower() not in allowed:
                    raise SettingError(name, f"{value!r} is not one of {', '.join(allowed)}")
            values = tuple(v.lower() for v in values)
        return values

    accepts = "a comma-separated list" + (f" of {', '.join(allowed)}" if allowed else "")
    return Kind(ConfigType.LIST, parse, accepts)


@dataclass(frozen=True)
class Setting:
    """One setting: its Kafka name, kind, default (None: unset) and why it exists."""

    name: str
    kind: Kind
    default: object
    doc: str
    section: str = ""
    required: bool = False


class Registry:
    """Every setting one component takes, by name; parses whole configurations."""

    def __init__(self, title: str, settings: Iterable[Setting]) -> None:
        self.title = title
        self._settings: dict[str, Setting] = {}
        for setting in settings:
            if setting.name in self._settings:
                raise ValueError(f"{title}: {setting.name} declared twice")
            self._settings[setting.name] = setting
        self._defaults = {
            s.name: None if s.default is None else s.kind.parse(s.name, s.default)
            for s in self._settings.values()
        }

    def __contains__(self, name: object) -> bool:
        return name in self._settings

    def __getitem__(self, name: str) -> Setting:
        try:
            return self._settings[name]
        except KeyError:
            raise SettingError(name, "unknown setting") from None

    def __iter__(self) -> Iterator[Setting]:
        return iter(self._settings.values())

    def default(self, name: str) -> Any:
        """The parsed default of ``name``."""
        self[name]
        return self._defaults[name]

    def check(self, name: str, raw: object) -> Any:
        """One value parsed, or SettingError naming the setting."""
        return self[name].kind.parse(name, raw)

    def parse(self, raw: Mapping[str, object]) -> Settings:
        """Every setting's value (defaults filled in); unknown names are refused."""
        if not isinstance(raw, Mapping):
            raise SettingError("config", f"expected a dict of settings, got {type(raw).__name__}")
        given = {str(k): v for k, v in raw.items() if v is not None}
        values = dict(self._defaults)
        for name, value in given.items():
            values[name] = self.check(name, value)
        for setting in self._settings.values():
            if setting.required and values[setting.name] is None:
                raise SettingError(setting.name, "required")
        return Settings(self, values, frozenset(given))


class Settings(Mapping[str, Any]):
    """The typed values of every setting of a registry, and which ones were given."""

    def __init__(self, registry: Registry, values: dict[str, Any], given: frozenset[str]):
        self.registry = registry
        self._values = values
        self.given = given

    def __getitem__(self, name: str) -> Any:
        if name not in self._values:
            raise SettingError(name, "unknown setting")
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def text(self, name: str) -> str:
        """The value as Kafka writes it (DescribeConfigs, generated docs)."""
        return self.registry[name].kind.render(self[name])

    def overlaid(self, values: Mapping[str, Any]) -> Settings:
        """These settings with ``values`` (already parsed) over them, counted as given."""
        return Settings(self.registry, {**self._values, **values}, self.given | set(values))


T = TypeVar("T")

_SETTING = "setting"
_SCALE = "scale"


def bound(registry: Registry, name: str, scale: int = 1) -> Any:
    """A dataclass field that holds setting ``name`` (times ``scale``, e.g. minutes to
    milliseconds); its default is the registry's, so the default is written once."""
    default = registry.default(name)
    if default is not None and scale != 1:
        default *= scale
    return dataclasses.field(default=default, metadata={_SETTING: name, _SCALE: scale})


def bind(cls: type[T], settings: Settings) -> T:
    """An instance of a dataclass of ``bound`` fields, from parsed settings."""
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        name = f.metadata.get(_SETTING)
        if name is not None:
            value = settings[name]
            scale = f.metadata[_SCALE]
            values[f.name] = value if value is None or scale == 1 else value * scale
    return cls(**values)
