"""Property-based fuzzing of every request type the broker accepts, at every version it
advertises: valid requests built from each API's schema, then flipped bytes, truncated
frames, and lengths or counts set to extremes. After each case the broker answers the
next valid client; a refused (malformed) request never reached a handler (the only code
that acts on requests) and created no topic or group;
and memory stays bounded over the whole run. EPOCHLOG_FUZZ_CASES sets the number of
cases (10,000 by default, as CI runs it)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import struct
import uuid
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from inprocess_broker import batch, broker_config
from kafka.protocol.metadata import ApiVersionsRequest
from kafka.protocol.schemas.fields import ArrayField, StructField

from epochlog.broker.broker import Broker
from epochlog.broker.handlers import SUPPORTED, Handler
from epochlog.broker.server import ProtocolViolation
from epochlog.protocol.apis import ApiKey
from epochlog.seams.real import real_seams
from epochlog.security.principal import ANONYMOUS
from epochlog.security.session import Session

CASES = int(os.environ.get("EPOCHLOG_FUZZ_CASES", "10000"))
# A handler may legitimately wait (a long-poll Fetch, a JoinGroup): not longer than this.
HANDLER_BOUND_S = 0.05
MEMORY_BOUND_KIB = 256 * 1024
SETTINGS = {
    "auto.create.topics.enable": "false",
    "offsets.topic.num.partitions": "1",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.num.partitions": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
    "controller.max.records.per.batch": "8",
}
_SIMPLE_VALUES: dict[str, Any] = {
    "int8": 0,
    "bool": False,
    "int16": 0,
    "uint16": 0,
    "int32": 0,
    "uint32": 0,
    "int64": 0,
    "float64": 0.0,
    "uuid": uuid.UUID(int=0),
    "string": "t",
    "bytes": b"",
    "records": bytes(batch([b"v"])),
}


def _sample(schema: StructField, version: int, cls: Any, api_key: int) -> Any:
    """A request with every field present: one element per array, topic "t"."""
    values = {}
    for field in schema.untagged_fields(version):
        values[field.name] = _value(field, version, api_key)
    return cls(**values)


def _value(field: Any, version: int, api_key: int) -> Any:
    if isinstance(field, ArrayField):
        return [_value(field.array_of, version, api_key)]
    if isinstance(field, StructField):
        return _sample(field, version, field.data_class, api_key)
    if field.type_str == "string" and api_key == ApiKey.DELETE_TOPICS:
        return "not-t"  # keep "t" for the other requests
    return _SIMPLE_VALUES[field.type_str]


def valid_frames() -> list[bytes]:
    """Every API at its lowest and highest version (header and body, no size prefix)."""
    frames = []
    for key, spec in sorted(SUPPORTED.items()):
        for version in sorted({spec.min_version, spec.max_version}):
            request = _sample(spec.request._struct, version, spec.request, key)
            request.with_header(correlation_id=7, client_id="fuzz")
            frames.append(bytes(request.encode(version=version, header=True)))
    return frames


def _api_versions_frame() -> bytes:
    request = ApiVersionsRequest(client_software_name="fuzz", client_software_version="1")
    request.with_header(correlation_id=1, client_id="fuzz")
    return bytes(request.encode(version=3, header=True))


VALID_FRAMES = valid_frames()
EXTREMES = [
    b"\x7f\xff",
    b"\xff\xff",
    b"\x80\x00",
    b"\x7f\xff\xff\xff",
    b"\xff\xff\xff\xff",
    b"\x80\x00\x00\x00",
    b"\xff\xff\xff\xff\x0f",  # the largest unsigned varint
    b"\x00",
]


def _mutate(
    frame: bytes, cut: int, flips: list[tuple[int, int]], extremes: list[tuple[int, int]]
) -> bytes:
    data = bytearray(frame[: max(8, len(frame) - cut)])
    for pos, mask in flips:
        data[pos % len(data)] ^= mask
    for pos, which in extremes:
        value = EXTREMES[which % len(EXTREMES)]
        at = 8 + pos % max(1, len(data) - 8)  # leave api key and version alone
        data[at : at + len(value)] = value
    return bytes(data)


FRAMES = st.one_of(
    st.binary(max_size=300),
    st.builds(
        lambda key, version, rest: struct.pack(">hhih", key, version, 7, -1) + rest,
        st.sampled_from(sorted(SUPPORTED)),
        st.integers(-1, 20),
        st.binary(max_size=200),
    ),
    st.builds(
        _mutate,
        st.sampled_from(VALID_FRAMES),
        st.integers(0, 40),
        st.lists(st.tuples(st.integers(0, 400), st.integers(1, 255)), max_size=4),
        st.lists(st.tuples(st.integers(0, 400), st.integers(0, 7)), max_size=2),
    ),
)


SESSION = Session("PLAINTEXT", "PLAINTEXT", ANONYMOUS, "fuzz")


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


def _names(broker: Broker) -> tuple[set[str], set[str]]:
    """Topics and groups: what a refused request must not have created."""
    _, groups = broker.coordinator.list_groups(None)
    return {t.name for t in broker.metadata_cache.topics()}, {g[0] for g in groups}


def _rss_kib() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() // 1024


def test_every_request_type_fuzzed_is_answered_or_refused_without_changing_anything(
    tmp_path: Path,
) -> None:
    loop = asyncio.new_event_loop()
    broker = Broker(broker_config(tmp_path, **SETTINGS), real_seams(seed=3))
    loop.run_until_complete(broker.start())
    loop.run_until_complete(broker.create_topic("t", 1, 1, {}))
    channel = broker.request_channel
    probe = _api_versions_frame()
    # Only handlers act on requests: a refused request must never reach one. (Background
    # work, such as a transaction timing out, may change the broker at any time.)
    reached: list[int] = []

    def counted(handler: Handler) -> Handler:
        async def handle(*args: Any) -> Any:
            reached.append(handler.api.key)
            return await handler.handle(*args)

        return Handler(handler.api, handle)

    channel._handlers = {key: counted(h) for key, h in channel._handlers.items()}

    def handle(frame: bytes) -> tuple[bool, CapturingConnection]:
        """(refused, what was sent)."""
        conn = CapturingConnection()
        try:
            loop.run_until_complete(
                asyncio.wait_for(channel.handle(frame, conn, SESSION), HANDLER_BOUND_S)
            )
        except ProtocolViolation:
            return True, conn
        except TimeoutError:
            pass
        return False, conn

    for frame in VALID_FRAMES:
        handle(frame)  # internal topics, groups and the like exist before fuzzing
    rss_before = _rss_kib()

    @settings(
        max_examples=CASES,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        database=None,
    )
    @given(FRAMES)
    def check(frame: bytes) -> None:
        topics, groups = _names(broker)
        reached.clear()
        refused, _ = handle(frame)
        if refused:
            assert reached == [], "a refused request reached its handler"
            new_topics, new_groups = _names(broker)
            assert new_topics <= topics and new_groups <= groups
        refused, answer = handle(probe)
        assert not refused and answer.sent, "the broker stopped answering ApiVersions"

    try:
        check()
        grown = _rss_kib() - rss_before
        assert grown < MEMORY_BOUND_KIB, f"memory grew by {grown} KiB over {CASES} cases"
        for frame in VALID_FRAMES[:4]:
            with contextlib.suppress(TimeoutError):
                assert not handle(frame)[0], "a valid request was refused after fuzzing"
    finally:
        loop.run_until_complete(broker.stop())
        loop.close()


def test_every_api_and_version_has_a_valid_sample_the_broker_accepts() -> None:
    """The fuzz corpus itself: every advertised API and version decodes."""
    from epochlog.protocol.apis import decode_request_body, decode_request_header, peek_header

    seen = set()
    for frame in VALID_FRAMES:
        key, version, _ = peek_header(frame)
        spec = SUPPORTED[key]
        request = decode_request_header(frame, spec.is_flexible(version))
        decode_request_body(spec, version, request.body)
        seen.add(key)
    assert seen == set(SUPPORTED)
