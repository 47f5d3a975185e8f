"""Ports handed to local brokers lie outside the kernel's ephemeral range, so an
outgoing connection cannot take one between its check and its bind (a CI failure:
EADDRINUSE at broker start)."""

from __future__ import annotations

import socket
from pathlib import Path

from epochlog.tools import local_ports
from epochlog.tools.local_ports import free_port, free_ports


def test_ports_are_below_the_ephemeral_range_and_not_handed_out_twice() -> None:
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    ports = [free_port() for _ in range(200)]
    assert all(local_ports._LOWEST <= port < low for port in ports)
    assert len(set(ports)) == len(ports)


def test_consecutive_ports_skip_a_port_someone_listens_on() -> None:
    first = free_ports(3)
    with socket.socket() as held:
        held.bind(("127.0.0.1", first + 1))
        held.listen()
        local_ports._cursor = first - local_ports._LOWEST
        base = free_ports(3)
    assert not base <= first + 1 < base + 3
    for port in range(base, base + 3):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", port))
