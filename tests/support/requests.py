"""Raw requests the tests send past any client, to pin what the broker answers."""

from __future__ import annotations

from typing import Any

from kafka.protocol.producer import ProduceRequest


def produce_request(
    topic: str, records: bytes, partition: int = 0, acks: int = -1, timeout_ms: int = 5000
) -> Any:
    """A Produce of ``records`` (already a record set) to one partition."""
    return ProduceRequest(
        transactional_id=None,
        acks=acks,
        timeout_ms=timeout_ms,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name=topic,
                partition_data=[
                    ProduceRequest.TopicProduceData.PartitionProduceData(
                        index=partition, records=records
                    )
                ],
            )
        ],
    )
