"""Property-based fuzzing of request decoding: whatever bytes arrive, the request channel
either answers or refuses the connection (ProtocolViolation); nothing else escapes."""

from __future__ import annotations

import asyncio
import contextlib
import struct
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from inprocess_broker import broker_config, valid_request_frames

from epochlog.broker.broker import Broker
from epochlog.broker.server import ProtocolViolation
from epochlog.protocol.apis import SUPPORTED
from epochlog.seams import real_seams


class CapturingConnection:
    peer = "fuzz"

    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def write(self, data) -> None:
        self.sent.append(bytes(data))

    def writelines(self, buffers) -> None:
        self.sent.extend(bytes(b) for b in buffers)

    async def send_file(self, file, offset: int, count: int) -> None:
        self.sent.append(file.pread(count, offset))

    async def drain(self) -> None:
        pass


VALID_FRAMES = valid_request_frames()
API_HEADERS = st.builds(
    lambda key, version, rest: struct.pack(">hhih", key, version, 7, -1) + rest,
    st.sampled_from(sorted(SUPPORTED)),
    st.integers(-1, 20),
    st.binary(max_size=200),
)
MUTATED = st.builds(
    lambda frame, cuts, flips: _mutate(frame, cuts, flips),
    st.sampled_from(VALID_FRAMES),
    st.integers(0, 400),
    st.lists(st.tuples(st.integers(0, 400), st.integers(1, 255)), max_size=6),
)


def _mutate(frame: bytes, cut: int, flips: list[tuple[int, int]]) -> bytes:
    data = bytearray(frame[: max(8, len(frame) - cut)])
    for pos, mask in flips:
        data[pos % len(data)] ^= mask
    return bytes(data)


def test_fuzzed_frames_are_answered_or_refused(tmp_path: Path) -> None:
    loop = asyncio.new_event_loop()
    config = broker_config(tmp_path, **{"auto.create.topics.enable": "false"})
    broker = Broker(config, real_seams(seed=3))
    loop.run_until_complete(broker.start())
    loop.run_until_complete(broker.create_topic("t", 1, 1, {}))
    channel = broker.request_channel

    def handle(frame: bytes) -> CapturingConnection:
        conn = CapturingConnection()
        # A fuzzed Fetch may ask to long-poll; waiting is a legal answer to that.
        with contextlib.suppress(ProtocolViolation, TimeoutError):
            loop.run_until_complete(asyncio.wait_for(channel.handle(frame, conn), 0.2))
        return conn

    @settings(max_examples=500, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.one_of(st.binary(max_size=300), API_HEADERS, MUTATED))
    def check(frame: bytes) -> None:
        handle(frame)

    try:
        check()
        for frame in VALID_FRAMES:
            assert handle(frame).sent, "a valid request must still be answered after fuzzing"
    finally:
        loop.run_until_complete(broker.stop())
        loop.close()
