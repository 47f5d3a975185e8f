"""Responses are decoded past their header directly (``apis.decode_response``: the
library's header path copies the whole frame), to what the library's header path
decodes: header v0, header v1 with and without tagged fields, and ApiVersions, whose
header is always v0."""

from __future__ import annotations

import uuid

import pytest
from kafka.protocol.consumer import FetchResponse
from kafka.protocol.metadata import ApiVersionsResponse

from epochlog.protocol.apis import decode_response
from epochlog.protocol.fetch_response import PartitionData, TopicData, encode_fetch_response

CORRELATION = (77).to_bytes(4, "big")


def _fetch_body(version: int) -> bytes:
    partitions = [PartitionData(0, 0, 10, 10, 2, [b"\x01" * 70]), PartitionData(1, 74, -1, -1, -1)]
    topics = [TopicData("t", uuid.UUID(int=5), partitions)]
    return b"".join(bytes(p) for p in encode_fetch_response(version, topics, session_id=0))


def _same(ours: object, library: object) -> None:
    assert ours.to_dict() == library.to_dict()  # type: ignore[attr-defined]


@pytest.mark.parametrize("version", [4, 11, 12, 13])
def test_a_fetch_answer_decodes_past_its_header(version: int) -> None:
    header = CORRELATION + (b"\x00" if version >= 12 else b"")
    data = bytearray(header + _fetch_body(version))
    ours = decode_response(FetchResponse, version, data)
    _same(ours, FetchResponse.decode(data, version=version, header=True))
    assert bytes(ours.responses[0].partitions[0].records) == b"\x01" * 70


def test_a_header_with_tagged_fields_is_read_by_the_library() -> None:
    # One tagged field (tag 5, one byte) in a v1 header.
    data = bytearray(CORRELATION + b"\x01\x05\x01\x00" + _fetch_body(13))
    _same(
        decode_response(FetchResponse, 13, data),
        FetchResponse.decode(data, version=13, header=True),
    )


def test_api_versions_answers_keep_header_v0_at_every_version() -> None:
    keys = [ApiVersionsResponse.ApiVersion(api_key=1, min_version=4, max_version=13)]
    response = ApiVersionsResponse(error_code=0, api_keys=keys, throttle_time_ms=0)
    data = bytearray(CORRELATION + bytes(response.encode(version=3)))
    ours = decode_response(ApiVersionsResponse, 3, data)
    _same(ours, ApiVersionsResponse.decode(data, version=3, header=True))
    assert ours.api_keys[0].max_version == 13
