"""A request header read directly (the common case: a client id within the frame and no
tagged fields) says what kafka.protocol's full decoder says; anything else goes to the
full decoder. A response header written directly is what kafka.protocol writes."""

from __future__ import annotations

import struct

import pytest
from kafka.protocol.api_header import ResponseHeader

from epochlog.protocol import apis
from epochlog.protocol.apis import RequestFrame, decode_request_header, encode_response_header


def _frame(client_id: bytes | None, flexible: bool, tags: bytes = b"\x00") -> bytes:
    head = struct.pack(">hhi", 3, 12 if flexible else 1, 42)
    if client_id is None:
        head += struct.pack(">h", -1)
    else:
        head += struct.pack(">h", len(client_id)) + client_id
    return head + (tags if flexible else b"") + b"body"


def _full(frame: bytes, flexible: bool, monkeypatch: pytest.MonkeyPatch) -> RequestFrame:
    with monkeypatch.context() as patched:
        patched.setattr(apis, "_common_header", lambda _frame, _flexible: None)
        return decode_request_header(frame, flexible)


@pytest.mark.parametrize("flexible", [False, True])
@pytest.mark.parametrize("client_id", [b"rdkafka", b"", None, "caf\u00e9-\u4e2d".encode()])
def test_a_common_header_reads_as_the_full_decoder_reads_it(
    client_id: bytes | None, flexible: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    frame = _frame(client_id, flexible)
    assert apis._common_header(frame, flexible) is not None
    fast, full = decode_request_header(frame, flexible), _full(frame, flexible, monkeypatch)
    assert (fast.api_key, fast.api_version, fast.correlation_id) == (3, 12 if flexible else 1, 42)
    assert fast.client_id == full.client_id == (None if client_id is None else client_id.decode())
    assert bytes(fast.body) == bytes(full.body) == b"body"


def test_tagged_fields_in_the_header_go_to_the_full_decoder() -> None:
    frame = _frame(b"c", True, tags=b"\x01\x05\x01z")
    assert apis._common_header(frame, True) is None
    assert bytes(decode_request_header(frame, True).body) == b"body"


@pytest.mark.parametrize(
    "frame",
    [
        struct.pack(">hhi", 3, 1, 42) + b"\x00",  # the length cut short
        struct.pack(">hhih", 3, 1, 42, 50) + b"short",  # past the frame
        struct.pack(">hhih", 3, 1, 42, -2) + b"body",  # a length Kafka forbids
        struct.pack(">hhih", 3, 1, 42, 2) + b"\xff\xfe",  # not UTF-8
    ],
    ids=["cut", "past-the-frame", "negative", "not-utf8"],
)
def test_anything_unusual_goes_to_the_full_decoder(frame: bytes) -> None:
    assert apis._common_header(frame, False) is None


@pytest.mark.parametrize("flexible", [False, True])
@pytest.mark.parametrize("correlation_id", [0, 42, -1, 2**31 - 1])
def test_a_response_header_is_what_kafka_protocol_writes(
    correlation_id: int, flexible: bool
) -> None:
    expected = ResponseHeader(correlation_id=correlation_id).encode(flexible=flexible)
    assert encode_response_header(correlation_id, flexible) == bytes(expected)
