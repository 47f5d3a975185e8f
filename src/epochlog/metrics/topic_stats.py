"""Kafka's BrokerTopicStats: records and bytes in and out per topic, counted where they
happen (appends as leader, consumers' fetches) and rendered at scrape time."""

from __future__ import annotations

from collections import defaultdict


class BrokerTopicStats:
    """Plain per-topic totals since the broker started (Prometheus counters)."""

    def __init__(self) -> None:
        self.messages_in: dict[str, int] = defaultdict(int)
        self.bytes_in: dict[str, int] = defaultdict(int)
        self.bytes_out: dict[str, int] = defaultdict(int)
        self.messages_out: dict[str, int] = defaultdict(int)

    def appended(self, topic: str, records: int, size: int) -> None:
        """An append as leader (Kafka's MessagesInPerSec and BytesInPerSec)."""
        self.messages_in[topic] += records
        self.bytes_in[topic] += size

    def fetched(self, topic: str, offsets: int, size: int) -> None:
        """Record bytes sent to a consumer; replicas' fetches are replication, not out
        (Kafka's BytesOutPerSec). Kafka counts no messages out: here they are the offsets
        a consumer got from its fetch offset on (read from batch headers, as the bytes
        go out unparsed; control records and compacted gaps count too)."""
        self.bytes_out[topic] += size
        self.messages_out[topic] += offsets
