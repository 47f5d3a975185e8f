"""The hand encoder of Produce requests writes, for every version the client may send
(3–9), exactly the bytes kafka.protocol writes for the same request (header included):
many topics and partitions, null and empty records, transactional ids or none, client
ids or none, names beyond ASCII; and it leaves each partition's records as a piece of
their own, the very object given, not a copy."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.producer import ProduceRequest

from epochlog.protocol.apis import frame
from epochlog.protocol.produce_request import EncodedProduce

_TEXT = st.none() | st.text(max_size=20)
partitions = st.lists(
    st.tuples(st.integers(0, 2**31 - 1), st.none() | st.binary(max_size=40)), max_size=5
)
topics = st.lists(st.tuples(st.text(min_size=1, max_size=20), partitions), max_size=4)


def kafka_python_bytes(request: EncodedProduce, version: int, client_id: str | None) -> bytes:
    theirs = ProduceRequest(
        transactional_id=request.transactional_id,
        acks=request.acks,
        timeout_ms=request.timeout_ms,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name=name,
                partition_data=[
                    ProduceRequest.TopicProduceData.PartitionProduceData(index=i, records=r)
                    for i, r in parts
                ],
            )
            for name, parts in request.topics
        ],
    )
    theirs.with_header(correlation_id=7, client_id=client_id)
    return b"".join(frame(theirs.encode(version=version, header=True)))


@settings(max_examples=300, deadline=None)
@given(
    version=st.integers(3, 9),
    transactional_id=_TEXT,
    client_id=_TEXT,
    acks=st.sampled_from([-1, 0, 1]),
    timeout_ms=st.integers(0, 2**31 - 1),
    topics=topics,
)
def test_the_bytes_are_kafka_protocols(
    version: int,
    transactional_id: str | None,
    client_id: str | None,
    acks: int,
    timeout_ms: int,
    topics: list[tuple[str, list[tuple[int, bytes | None]]]],
) -> None:
    ours = EncodedProduce(transactional_id, acks, timeout_ms, topics)
    ours.with_header(correlation_id=7, client_id=client_id)
    assert b"".join(ours.encode_framed(version)) == kafka_python_bytes(ours, version, client_id)


def test_records_go_out_as_they_are() -> None:
    first, second = b"a" * 100_000, bytearray(b"b" * 70_000)
    request = EncodedProduce(None, -1, 30_000, [("t", [(0, first)]), ("u", [(3, second)])])
    request.with_header(correlation_id=1, client_id="c")
    pieces = request.encode_framed(9)
    assert sum(p is first for p in pieces) == 1 and sum(p is second for p in pieces) == 1


def test_versions_before_3_are_refused() -> None:
    with pytest.raises(ValueError, match="Produce v2"):
        EncodedProduce(None, 1, 1_000, []).encode_framed(2)
