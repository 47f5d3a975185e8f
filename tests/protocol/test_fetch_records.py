"""A Fetch answer's records come out of the client's decoder as views of the answer's
frame, not copies (the consumer decodes them from there, a follower copies them once,
into the buffer it appends from); every other field as the library decodes it. Every
version the broker serves."""

from __future__ import annotations

import struct
import uuid

import pytest
from kafka.protocol.consumer import FetchResponse

from epochlog.broker.handlers.fetch import API as FETCH
from epochlog.protocol.apis import decode_response

TOPIC_ID = uuid.UUID("01234567-89ab-cdef-0123-456789abcdef")
FIRST = b"\x01" * 70
SECOND = b"\x02" * 90


def _response() -> FetchResponse:
    topic = FetchResponse.FetchableTopicResponse
    partition = topic.PartitionData
    return FetchResponse(
        throttle_time_ms=5,
        error_code=0,
        session_id=17,
        responses=[
            topic(
                topic="t",
                topic_id=TOPIC_ID,
                partitions=[
                    partition(partition_index=0, error_code=0, high_watermark=9, records=FIRST),
                    partition(partition_index=1, error_code=6, high_watermark=-1, records=None),
                    partition(partition_index=2, error_code=0, high_watermark=4, records=SECOND),
                ],
            )
        ],
    )


@pytest.mark.parametrize("version", range(FETCH.min_version, FETCH.max_version + 1))
def test_records_are_views_of_the_answer_and_the_rest_decodes_as_the_library_does(
    version: int,
) -> None:
    body = _response().encode(version=version)
    header = struct.pack(">i", 42) + (b"\x00" if version >= 12 else b"")
    frame = bytearray(header + body)
    decoded = decode_response(FetchResponse, version, frame)
    expected = FetchResponse.decode(body, version=version)
    partitions = decoded.responses[0].partitions
    first, failed, second = partitions
    assert isinstance(first.records, memoryview) and isinstance(second.records, memoryview)
    assert bytes(first.records) == FIRST and bytes(second.records) == SECOND
    assert failed.records is None
    first.records[0] = 0x7F  # the very bytes of the frame
    assert frame[frame.index(b"\x01" * 69) - 1] == 0x7F
    for field in ("throttle_time_ms", "error_code", "session_id"):
        assert getattr(decoded, field) == getattr(expected, field), field
    got_topic, want_topic = decoded.responses[0], expected.responses[0]
    assert (got_topic.topic, got_topic.topic_id) == (want_topic.topic, want_topic.topic_id)
    for got, want in zip(partitions, want_topic.partitions, strict=True):
        assert (got.partition_index, got.error_code, got.high_watermark) == (
            want.partition_index,
            want.error_code,
            want.high_watermark,
        )
