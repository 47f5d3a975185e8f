"""Debian's kcat (librdkafka 2.0.2: no KIP-320, older protocol paths) via subprocess.

kcat cannot give each record its own timestamp or headers: records carry the same
headers (-H) and librdkafka's CreateTime, and the checks use what was consumed.
"""

from __future__ import annotations

import time

import pytest

from support.broker import BrokerProcess
from support.clients import (
    CODECS,
    create_topic,
    kcat_consume,
    kcat_offset_for_time,
    kcat_produce,
)
from support.records import (
    TIMESTAMP_RECORDS,
    Rec,
    assert_same_records,
    expected_offset_for_time,
    interop_record_count,
    make_records,
    timestamp_probes,
)

pytestmark = pytest.mark.interop


def _kcat_records(n: int, tag: str, headers: list[tuple[str, bytes]]) -> list[Rec]:
    """The shared records as kcat can send them: fixed headers, no own timestamp."""
    return [Rec(r.key, r.value, headers) for r in make_records(n, tag)]


@pytest.mark.parametrize("codec", CODECS)
def test_kcat_round_trips_every_record_with_codec(
    module_broker: BrokerProcess, kcat: str, codec: str
) -> None:
    topic = f"kcat-roundtrip-{codec}"
    create_topic(module_broker.bootstrap, topic)
    headers = [("client", "kcat"), ("codec", codec)]
    recs = _kcat_records(
        interop_record_count(), f"kc{codec}", [(k, v.encode()) for k, v in headers]
    )
    before_ms = int(time.time() * 1000)
    kcat_produce(kcat, module_broker.bootstrap, topic, recs, codec, headers)
    after_ms = int(time.time() * 1000)
    got = kcat_consume(kcat, module_broker.bootstrap, topic)
    assert_same_records(recs, got, check_timestamps=False)
    stamps = [g.timestamp for g in got]
    assert before_ms - 1000 <= min(stamps) and max(stamps) <= after_ms + 1000, (
        "CreateTime stamped by librdkafka is not within the produce window"
    )
    assert stamps == sorted(stamps), "CreateTime went backwards within one producer"


def test_kcat_query_offsets_by_timestamp_agree_with_record_timestamps(
    module_broker: BrokerProcess, kcat: str
) -> None:
    topic = "kcat-offsets-for-times"
    create_topic(module_broker.bootstrap, topic)
    recs = _kcat_records(TIMESTAMP_RECORDS, "kcts", [("client", b"kcat")])
    half = len(recs) // 2
    kcat_produce(kcat, module_broker.bootstrap, topic, recs[:half], "snappy", [("client", "kcat")])
    time.sleep(0.05)  # so the two halves have distinct CreateTime, a boundary worth probing
    kcat_produce(kcat, module_broker.bootstrap, topic, recs[half:], "snappy", [("client", "kcat")])
    got = kcat_consume(kcat, module_broker.bootstrap, topic)
    assert_same_records(recs, got, check_timestamps=False)
    stamps = [g.timestamp for g in got]
    targets = timestamp_probes(stamps) + [stamps[half]]
    want = [expected_offset_for_time(stamps, t) for t in targets]
    got_offsets = [kcat_offset_for_time(kcat, module_broker.bootstrap, topic, t) for t in targets]
    assert list(zip(targets, got_offsets, strict=True)) == list(zip(targets, want, strict=True))
