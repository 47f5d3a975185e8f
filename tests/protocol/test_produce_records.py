"""A Produce request's records come out of the decoder as views of the request frame,
not copies: the log patches offsets and leader epochs into the frame itself. Every
version the broker serves, from a writable frame (a large request, read into a buffer
of its own) and a read-only one (a small request)."""

from __future__ import annotations

import pytest
from kafka.protocol.producer import ProduceRequest
from kafka.protocol.sasl import SaslAuthenticateRequest

from epochlog.broker.handlers.produce import API as PRODUCE
from epochlog.broker.handlers.sasl_authenticate import API as SASL
from epochlog.protocol.apis import decode_request_body

FIRST = b"\x01" * 70
SECOND = b"\x02" * 90


def _request() -> ProduceRequest:
    partition = ProduceRequest.TopicProduceData.PartitionProduceData
    return ProduceRequest(
        transactional_id="txn-a",
        acks=-1,
        timeout_ms=1500,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name="t",
                partition_data=[
                    partition(index=0, records=FIRST),
                    partition(index=1, records=None),
                ],
            ),
            ProduceRequest.TopicProduceData(
                name="u", partition_data=[partition(index=4, records=SECOND)]
            ),
        ],
    )


VERSIONS = range(PRODUCE.min_version, PRODUCE.max_version + 1)


@pytest.mark.parametrize("version", VERSIONS)
def test_records_of_a_writable_frame_are_views_the_log_can_patch(version: int) -> None:
    frame = bytearray(_request().encode(version=version))
    decoded = decode_request_body(PRODUCE, version, memoryview(frame))
    assert decoded.transactional_id == "txn-a"
    assert (decoded.acks, decoded.timeout_ms) == (-1, 1500)
    assert [t.name for t in decoded.topic_data] == ["t", "u"]
    first, empty = decoded.topic_data[0].partition_data
    second = decoded.topic_data[1].partition_data[0]
    assert (first.index, empty.index, second.index) == (0, 1, 4)
    assert empty.records is None
    assert isinstance(first.records, memoryview) and not first.records.readonly
    assert bytes(first.records) == FIRST and bytes(second.records) == SECOND
    first.records[0] = 0x7F  # what the log's offset patch does: the frame itself changes
    assert frame[frame.index(b"\x01" * 69) - 1] == 0x7F


@pytest.mark.parametrize("version", VERSIONS)
def test_records_of_a_read_only_frame_are_read_only_views(version: int) -> None:
    frame = bytes(_request().encode(version=version))
    decoded = decode_request_body(PRODUCE, version, memoryview(frame))
    records = decoded.topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview) and records.readonly
    assert bytes(records) == FIRST


def test_other_requests_still_decode_bytes_fields_as_bytes() -> None:
    """Only Produce's decoder hands out views: a SASL token stays ``bytes``."""
    token = b"\x00user\x00secret"
    frame = bytearray(SaslAuthenticateRequest(auth_bytes=token).encode(version=1))
    decoded = decode_request_body(SASL, 1, memoryview(frame))
    assert type(decoded.auth_bytes) is bytes and decoded.auth_bytes == token
