"""queued.max.request.bytes cannot be held hostage: connections that announce large
frames, send a few bytes and stall leave a real broker process answering everyone
else at once, cost it memory only for what they sent, and are closed with a log line
once they have stalled for request.stall.timeout.ms."""

from __future__ import annotations

import socket
import struct
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from support.broker import BrokerProcess, api_versions_probe, wait_until

BrokerFactory = Callable[..., BrokerProcess]

BUDGET = 30_000_000
# Three frames of a third of the budget each: together they announce all of it.
ANNOUNCED = BUDGET // 3
SETTINGS = {"queued.max.request.bytes": BUDGET, "socket.request.max.bytes": ANNOUNCED}
# An ApiVersions is answered in milliseconds; the hostages held it for as long as
# connections.max.idle.ms (10 minutes by default) before. Probes are retried within a
# guard so that a machine busy with other tests cannot fail this one.
ANSWERED_WITHIN_S = 1.0
GUARD_S = 20.0


def unread_bytes(local_port: int, peer_port: int) -> int:
    """Bytes the kernel holds for a loopback socket that its process has not read
    (/proc/net/tcp's rx_queue): zero once the broker has taken what a peer sent."""
    wanted = (f"0100007F:{local_port:04X}", f"0100007F:{peer_port:04X}")
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if (fields[1], fields[2]) == wanted:
            return int(fields[4].split(":")[1], 16)
    raise AssertionError(f"no socket 127.0.0.1:{local_port} <- 127.0.0.1:{peer_port}")


@contextmanager
def hostages(broker: BrokerProcess, count: int) -> Iterator[list[socket.socket]]:
    """``count`` connections, each announcing an ANNOUNCED-byte ApiVersions frame and
    sending its 10-byte header only, once the broker has read those bytes."""
    with ExitStack() as stack:
        held = []
        for correlation_id in range(count):
            conn = stack.enter_context(socket.create_connection(("127.0.0.1", broker.port)))
            conn.sendall(struct.pack(">ihhih", ANNOUNCED, 18, 0, correlation_id, -1))
            held.append(conn)
        for conn in held:
            peer_port = conn.getsockname()[1]
            wait_until(
                lambda port=peer_port: unread_bytes(broker.port, port) == 0,
                GUARD_S,
                "the broker to read a hostage's first bytes",
            )
        yield held


def test_three_connections_announcing_the_whole_budget_leave_others_answered(
    broker_factory: BrokerFactory,
) -> None:
    broker = broker_factory(SETTINGS)
    with hostages(broker, 3):
        wait_until(
            lambda: api_versions_probe("127.0.0.1", broker.port, timeout=ANSWERED_WITHIN_S),
            GUARD_S,
            f"an ApiVersions answered within {ANSWERED_WITHIN_S} s beside the hostages",
        )


def test_announced_frames_cost_the_broker_memory_only_for_what_arrived(
    broker_factory: BrokerFactory,
) -> None:
    broker = broker_factory(SETTINGS)
    before = broker.rss_bytes()
    # Two: both are admitted to the budget. Once an ApiVersions after them is answered,
    # the broker has made their frames' buffers.
    with hostages(broker, 2):
        assert api_versions_probe("127.0.0.1", broker.port, timeout=GUARD_S)
        grown = broker.rss_bytes() - before
    # 20 MB announced; a frame's buffer starts at most 1 MiB, and is not zeroed.
    assert grown < 8 << 20, f"the broker grew by {grown} bytes"


def test_a_stalled_frame_closes_its_connection_with_a_log_line(
    broker_factory: BrokerFactory,
) -> None:
    broker = broker_factory({**SETTINGS, "request.stall.timeout.ms": 300})
    with hostages(broker, 1) as (conn,):
        conn.settimeout(GUARD_S)
        assert conn.recv(1) == b"", "the broker answered a frame it never received"
    wait_until(
        lambda: "stalled for request.stall.timeout.ms" in broker.output(),
        GUARD_S,
        "the broker's log line\n" + broker.tail(),
    )
