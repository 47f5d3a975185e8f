"""Kafka's JAAS text as ``sasl.jaas.config`` holds it: one login module, its flag and its
options (``org.apache.kafka.common.security.plain.PlainLoginModule required
username="admin" password="secret" user_alice="alice-secret";``). The PLAIN module's
``user_<name>`` options are the users a broker accepts; ``username``/``password`` are
what a broker presents to the others."""

from __future__ import annotations

import re
from dataclasses import dataclass

from epochlog.settings.registry import SettingError

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
_FLAGS = ("required", "requisite", "sufficient", "optional")
_HEAD = re.compile(r"\s*([A-Za-z_$][\w$.]*)\s+(\w+)")
_OPTION = re.compile(r'\s*([\w.$-]+)\s*=\s*(?:"((?:\\.|[^"\\])*)"|([^\s;"]+))')


@dataclass(frozen=True)
class JaasConfig:
    module: str
    options: dict[str, str]

    def plain_users(self) -> dict[str, str]:
        """PlainLoginModule's ``user_<name>="<password>"`` entries."""
        return {k[5:]: v for k, v in self.options.items() if k.startswith("user_") and k[5:]}

    def credentials(self) -> tuple[str, str] | None:
        """(username, password) this broker authenticates with to the others."""
        if "username" in self.options and "password" in self.options:
            return self.options["username"], self.options["password"]
        return None


def parse_jaas(setting: str, text: str) -> JaasConfig:
    """One login module entry ending with ``;``, as Kafka's JaasConfig reads it."""
    head = _HEAD.match(text)
    if head is None:
        raise SettingError(setting, "expected '<LoginModule class> required key=\"value\" ...;'")
    module, flag = head.group(1), head.group(2)
    if flag.lower() not in _FLAGS:
        raise SettingError(setting, f"login module flag {flag!r} is not one of {', '.join(_FLAGS)}")
    options: dict[str, str] = {}
    position = head.end()
    while True:
        rest = text[position:].lstrip()
        if rest.startswith(";"):
            if rest[1:].strip():
                raise SettingError(setting, "exactly one login module is expected")
            return JaasConfig(module, options)
        option = _OPTION.match(text, position)
        if option is None:
            raise SettingError(setting, f"cannot parse the option at {rest[:30]!r} (or no ';')")
        value = option.group(2)
        value = re.sub(r"\\(.)", r"\1", value) if value is not None else option.group(3)
        options[option.group(1)] = value
        position = option.end()
