"""The hand-written Fetch response encoder must agree with kafka-python's decoder."""

import uuid

import pytest
from kafka.protocol.consumer import FetchResponse

from epochlog.protocol.fetch_response import PartitionData, TopicData, encode_fetch_response

TOPIC_ID = uuid.UUID("12345678-1234-5678-1234-567812345678")
RECORDS = b"\x01" * 70


def _encode(version: int, partitions: list[PartitionData]) -> bytes:
    parts = encode_fetch_response(version, [TopicData("t", TOPIC_ID, partitions)], session_id=0)
    return b"".join(bytes(p) for p in parts)


@pytest.mark.parametrize("version", range(4, 14))
def test_encoded_fetch_response_decodes_with_kafka_python(version: int) -> None:
    partitions = [
        PartitionData(0, 0, 10, 10, 2, [RECORDS[:30], RECORDS[30:]]),
        PartitionData(1, 74, -1, -1, -1, current_leader=(3, 7)),
        PartitionData(2, 0, 5, 5, 0, diverging_epoch=(4, 3)),
    ]
    decoded = FetchResponse.decode(_encode(version, partitions), version=version)
    (topic,) = decoded.responses
    if version >= 13:
        assert topic.topic_id == TOPIC_ID
    else:
        assert topic.topic == "t"
    p0, p1, p2 = topic.partitions
    assert (p0.partition_index, p0.high_watermark, p0.last_stable_offset) == (0, 10, 10)
    assert bytes(p0.records) == RECORDS
    assert p1.error_code == 74
    if version >= 5:
        assert p0.log_start_offset == 2
    if version >= 12:
        assert (p1.current_leader.leader_id, p1.current_leader.leader_epoch) == (3, 7)
        assert (p2.diverging_epoch.epoch, p2.diverging_epoch.end_offset) == (4, 3)
