"""Ports for processes started on this host (the demo, ``epochlog chaos``, the tests).

A port the kernel hands out for ``bind(0)`` comes from the ephemeral range, the same
range outgoing connections take their local ports from: between the moment it is
found free and the moment a broker binds it, any connect() on the host may take it
(seen in CI: EADDRINUSE at broker start). Ports are therefore chosen below that range,
from a cursor that starts at a place drawn per process (so parallel test workers
start far apart) and moves on after every hand-out (so a port given out and not yet
bound is not given out again)."""

from __future__ import annotations

import os
import random
import socket
from pathlib import Path

_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_LOWEST = 10000
_cursor: int | None = None


def _ephemeral_low() -> int:
    try:
        return int(_EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _bindable(host: str, port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def free_ports(count: int = 1, host: str = "127.0.0.1") -> int:
    """The first of ``count`` consecutive ports on ``host`` that nobody holds now and
    that no outgoing connection can take before they are bound."""
    global _cursor
    high = _ephemeral_low()
    span = high - _LOWEST
    if span < 10 * count:
        raise RuntimeError(
            f"the ephemeral port range starts at {high}: too low to keep listening ports "
            f"out of it ({_EPHEMERAL_RANGE})"
        )
    if _cursor is None:
        _cursor = random.Random(os.getpid()).randrange(span)
    for _ in range(span):
        base = _LOWEST + _cursor % (span - count + 1)
        _cursor += count
        if all(_bindable(host, base + i) for i in range(count)):
            return base
    raise RuntimeError(f"found no {count} consecutive free ports on {host}")


def free_port(host: str = "127.0.0.1") -> int:
    """A port on ``host`` that nobody holds now (it is bound a moment later)."""
    return free_ports(1, host)
