"""The hand encoder of Produce answers writes, for every version the broker serves (3–9),
exactly the bytes kafka.protocol writes for the same answer: many topics and
partitions, errors with and without messages, per-batch record errors, names beyond
ASCII; and a throttle set after encoding lands in the throttle_time_ms field."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.producer import ProduceResponse

from epochlog.broker.responses import RawResponse
from epochlog.protocol.produce_response import (
    PartitionAnswer,
    encode_produce_response,
    throttle_field_end,
)

_Partition = ProduceResponse.TopicProduceResponse.PartitionProduceResponse
_I64 = st.integers(-(2**63), 2**63 - 1)
_TEXT = st.none() | st.text(max_size=30)

answers = st.builds(
    PartitionAnswer,
    index=st.integers(0, 2**31 - 1),
    error_code=st.integers(-1, 120),
    base_offset=_I64,
    log_append_time_ms=_I64,
    log_start_offset=_I64,
    record_errors=st.lists(st.tuples(st.integers(0, 2**31 - 1), _TEXT), max_size=3),
    error_message=_TEXT,
)
topics = st.lists(
    st.tuples(st.text(min_size=1, max_size=20), st.lists(answers, max_size=6)), max_size=4
)


def kafka_python_bytes(
    version: int, topics: list[tuple[str, list[PartitionAnswer]]], throttle: int
) -> bytes:
    response = ProduceResponse(
        responses=[
            ProduceResponse.TopicProduceResponse(
                name=name,
                partition_responses=[
                    _Partition(
                        index=p.index,
                        error_code=p.error_code,
                        base_offset=p.base_offset,
                        log_append_time_ms=p.log_append_time_ms,
                        log_start_offset=p.log_start_offset,
                        record_errors=[
                            _Partition.BatchIndexAndErrorMessage(
                                batch_index=i, batch_index_error_message=text
                            )
                            for i, text in p.record_errors
                        ],
                        error_message=p.error_message,
                    )
                    for p in partitions
                ],
            )
            for name, partitions in topics
        ],
        throttle_time_ms=throttle,
    )
    return bytes(response.encode(version=version))


@settings(max_examples=60, deadline=None)
@given(version=st.integers(3, 9), topics=topics, throttle=st.integers(0, 2**31 - 1))
def test_every_version_encodes_as_kafka_python_does(
    version: int, topics: list[tuple[str, list[PartitionAnswer]]], throttle: int
) -> None:
    ours = encode_produce_response(version, topics, throttle)
    assert bytes(ours) == kafka_python_bytes(version, topics, throttle)


@given(version=st.integers(3, 9), topics=topics)
def test_a_throttle_set_after_encoding_is_the_one_decoded(
    version: int, topics: list[tuple[str, list[PartitionAnswer]]]
) -> None:
    body = encode_produce_response(version, topics)
    raw = RawResponse([body], [], (0, len(body) - 4 - throttle_field_end(version)))
    raw.set_throttle(1234)
    (patched,) = raw.parts
    assert bytes(patched) == kafka_python_bytes(version, topics, 1234)
