"""The principal a connection acts as: ``User:ANONYMOUS`` unless a TLS client presented
a certificate, whose subject ``ssl.principal.mapping.rules`` turns into ``User:<name>``
(Kafka's SslPrincipalMapper: RULE:pattern/replacement/[LU] and DEFAULT)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from cryptography import x509

from epochlog.settings.registry import SettingError

ANONYMOUS = "User:ANONYMOUS"
_RULE = re.compile(r"\s*(DEFAULT|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?))\s*(,|$)")


def subject_name(der: bytes) -> str:
    """A certificate's subject as RFC 2253 text, as Java's X500Principal.getName()."""
    return x509.load_der_x509_certificate(der).subject.rfc4514_string()


def _replacement(text: str) -> Callable[[re.Match[str]], str]:
    """Java's replacement syntax: ``$n`` is group n, a backslash escapes a character."""
    parts: list[str | int] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char == "\\" and i + 1 < len(text):
            parts.append(text[i + 1])
            i += 2
        elif char == "$" and i + 1 < len(text) and text[i + 1].isdigit():
            j = i + 1
            while j < len(text) and text[j].isdigit():
                j += 1
            parts.append(int(text[i + 1 : j]))
            i = j
        else:
            parts.append(char)
            i += 1
    return lambda m: "".join(p if isinstance(p, str) else m.group(p) or "" for p in parts)


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT, the whole name unchanged
    replace: Callable[[re.Match[str]], str] | None = None
    case: str = ""

    def apply(self, name: str) -> str | None:
        if self.pattern is None or self.replace is None:
            return name
        match = self.pattern.fullmatch(name)
        if match is None:
            return None
        result = self.replace(match)
        return (
            result.lower() if self.case == "L" else result.upper() if self.case == "U" else result
        )


class PrincipalMapper:
    """``ssl.principal.mapping.rules``, parsed once; the first matching rule applies."""

    def __init__(self, rules: list[_Rule]) -> None:
        self._rules = rules

    @classmethod
    def parse(cls, text: str, setting: str = "ssl.principal.mapping.rules") -> PrincipalMapper:
        """The rules of ``setting`` (named in a refusal: a listener's own rules are
        ``listener.name.<listener>.ssl.principal.mapping.rules``)."""
        rules: list[_Rule] = []
        position = 0
        text = text.strip()
        while position < len(text):
            match = _RULE.match(text, position)
            if match is None or match.end() == position:
                raise SettingError(setting, f"cannot parse the rule at {text[position:]!r}")
            if match.group(1) == "DEFAULT":
                rules.append(_Rule(None))
            else:
                try:
                    pattern = re.compile(match.group(2))
                except re.error as exc:
                    raise SettingError(setting, f"bad pattern {match.group(2)!r}: {exc}") from None
                rules.append(_Rule(pattern, _replacement(match.group(3)), match.group(4)))
            position = match.end()
        if not rules:
            raise SettingError(setting, "expected at least one rule (DEFAULT keeps the name)")
        return cls(rules)

    def principal(self, subject: str) -> str | None:
        """``User:<name>`` for a certificate subject, or None when no rule matches (the
        client is refused, as Kafka fails its authentication)."""
        for rule in self._rules:
            name = rule.apply(subject)
            if name is not None:
                return f"User:{name}"
        return None
