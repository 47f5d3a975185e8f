"""confluent-kafka 2.16 (librdkafka, idempotent producer, KIP-320 aware) against the broker."""

from __future__ import annotations

import pytest

from support.broker import BrokerProcess
from support.clients import (
    CODECS,
    confluent_consume,
    confluent_offsets_for_times,
    confluent_produce,
    confluent_watermarks,
    create_topic,
)
from support.records import (
    TIMESTAMP_RECORDS,
    assert_same_records,
    expected_offset_for_time,
    interop_record_count,
    make_records,
    timestamp_probes,
)

pytestmark = pytest.mark.interop


@pytest.mark.parametrize("codec", CODECS)
def test_confluent_kafka_round_trips_every_record_with_codec(
    module_broker: BrokerProcess, codec: str
) -> None:
    topic = f"confluent-roundtrip-{codec}"
    create_topic(module_broker.bootstrap, topic)
    recs = make_records(interop_record_count(), f"ck{codec}")
    offsets = confluent_produce(module_broker.bootstrap, topic, recs, codec)
    assert offsets == list(range(len(recs))), "delivery reports are not offsets 0..n-1"
    assert confluent_watermarks(module_broker.bootstrap, topic) == (0, len(recs))
    got = confluent_consume(module_broker.bootstrap, topic, len(recs))
    assert_same_records(recs, got)


def test_confluent_kafka_offsets_for_times_agree_with_record_timestamps(
    module_broker: BrokerProcess,
) -> None:
    topic = "confluent-offsets-for-times"
    create_topic(module_broker.bootstrap, topic)
    recs = make_records(TIMESTAMP_RECORDS, "ckts")
    confluent_produce(module_broker.bootstrap, topic, recs, "lz4")
    stamps = [r.timestamp for r in recs]
    targets = timestamp_probes(stamps)
    want = [expected_offset_for_time(stamps, t) for t in targets]
    got = confluent_offsets_for_times(module_broker.bootstrap, topic, targets)
    assert list(zip(targets, got, strict=True)) == list(zip(targets, want, strict=True))
