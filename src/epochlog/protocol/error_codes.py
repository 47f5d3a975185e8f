"""The error codes a response message carries, wherever its schema puts them at the
answered version (top level, per topic, per partition), as Kafka's
``AbstractResponse.errorCounts`` finds them for its request metrics."""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from typing import Any


@cache
def _shape(message_class: type, version: int) -> tuple[bool, tuple[str, ...]]:
    """(has an error_code field at ``version``, names of its nested struct fields)."""
    fields = [
        f
        for f in message_class._struct._fields  # type: ignore[attr-defined]
        if f.for_version_q(version)
    ]
    has_error = any(f.name == "error_code" for f in fields)
    nested = tuple(f.name for f in fields if f.is_struct() or f.is_struct_array())
    return has_error, nested


def error_codes(message: Any, version: int) -> Iterator[int]:
    """Every ``error_code`` of a kafka.protocol message as encoded at ``version``."""
    has_error, nested = _shape(type(message), version)
    if has_error:
        yield int(message.error_code)
    for name in nested:
        value = getattr(message, name)
        if value is None:
            continue
        for item in value if isinstance(value, list) else (value,):
            yield from error_codes(item, version)
