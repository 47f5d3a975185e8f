"""kafka-python 3.0.12 (pure Python, KIP-320 aware from Metadata v9) against the broker."""

from __future__ import annotations

import pytest

from support.broker import BrokerProcess
from support.clients import (
    CODECS,
    create_topic,
    kafka_python_consume,
    kafka_python_offsets_for_times,
    kafka_python_produce,
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
def test_kafka_python_round_trips_every_record_with_codec(
    module_broker: BrokerProcess, codec: str
) -> None:
    topic = f"kafka-python-roundtrip-{codec}"
    create_topic(module_broker.bootstrap, topic)
    recs = make_records(interop_record_count(), f"kp{codec}")
    offsets = kafka_python_produce(module_broker.bootstrap, topic, recs, codec)
    assert offsets == list(range(len(recs))), "produce acknowledgements are not offsets 0..n-1"
    got = kafka_python_consume(module_broker.bootstrap, topic, len(recs))
    assert_same_records(recs, got)


def test_kafka_python_offsets_for_times_agree_with_record_timestamps(
    module_broker: BrokerProcess,
) -> None:
    topic = "kafka-python-offsets-for-times"
    create_topic(module_broker.bootstrap, topic)
    recs = make_records(TIMESTAMP_RECORDS, "kpts")
    kafka_python_produce(module_broker.bootstrap, topic, recs, "gzip")
    stamps = [r.timestamp for r in recs]
    targets = timestamp_probes(stamps)
    want = [expected_offset_for_time(stamps, t) for t in targets]
    got = kafka_python_offsets_for_times(module_broker.bootstrap, topic, targets)
    assert list(zip(targets, got, strict=True)) == list(zip(targets, want, strict=True))
