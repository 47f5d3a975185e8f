"""The error codes a response message carries, wherever its schema puts them (top
level, per topic, per partition), as Kafka's ``AbstractResponse.errorCounts`` finds
them for its request metrics."""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from typing import Any


@cache
def _shape(message_class: type) -> tuple[bool, tuple[str, ...]]:
    """(has an error_code field, names of its nested struct and struct-array fields)."""
    fields = message_class._struct._fields  # type: ignore[attr-defined]
    has_error = any(f.name == "error_code" for f in fields)
    nested = tuple(f.name for f in fields if f.is_struct() or f.is_struct_array())
    return has_error, nested


def error_codes(message: Any) -> Iterator[int]:
    """Every ``error_code`` in a decoded or built kafka.protocol message."""
    has_error, nested = _shape(type(message))
    if has_error:
        yield int(message.error_code)
    for name in nested:
        value = getattr(message, name)
        if value is None:
            continue
        if isinstance(value, list):
            for item in value:
                yield from error_codes(item)
        else:
            yield from error_codes(value)
