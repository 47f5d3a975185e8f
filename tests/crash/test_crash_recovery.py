"""A real broker process crashes (SIGKILL) or finds damaged segments at restart.

What must hold: every acknowledged record survives with flush on every message,
nothing corrupt is ever served, damage costs only the damaged batches (a hole, which
this only copy's readers see as a gap in offsets, listed by `epochlog quarantine
list`), and no offset is ever given out twice; a torn tail after a crash is cut and
logged, and the log takes new writes at the offset after the last good record.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import confluent_kafka as ck
import pytest

from support.broker import BrokerProcess, run_epochlog
from support.clients import (
    confluent_consume,
    confluent_produce,
    confluent_producer,
    confluent_watermarks,
    create_topic,
    kafka_python_consume,
)
from support.records import Got, Rec, index_of, make_records
from support.segments import batch_spans, cut_file, flip_bytes, segment_files

pytestmark = pytest.mark.crash

BrokerFactory = Callable[..., BrokerProcess]

# The broker is killed once this many records are acknowledged, mid-stream.
KILL_AFTER_ACKS = 3000
# Records still sent after the kill, so some are in flight or queued when it dies.
SENT_AFTER_KILL = 2000


def _assert_prefix_of_stream(got: list[Got], recs: list[Rec]) -> list[int]:
    """Consumed records are produced records, at offsets 0.., in produce order, no dups."""
    indices = []
    for pos, g in enumerate(got):
        assert g.offset == pos, f"offset {g.offset} at position {pos}: a gap or a repeat"
        i = index_of(g.key)
        want = recs[i]
        assert (g.key, g.value, g.headers, g.timestamp) == (
            want.key,
            want.value,
            want.headers,
            want.timestamp,
        ), f"offset {g.offset} holds a record that differs from produced record {i}"
        indices.append(i)
    assert indices == sorted(set(indices)), "records out of produce order or duplicated"
    return indices


def _produce_one_more(broker: BrokerProcess, topic: str, tag: str) -> int:
    """Produce one new record and return the offset its acknowledgement names."""
    rec = make_records(1, tag)[0]
    (offset,) = confluent_produce(broker.bootstrap, topic, [rec], "none")
    return offset


def test_every_acknowledged_record_survives_sigkill_during_produce_stream(
    broker_factory: BrokerFactory,
) -> None:
    broker = broker_factory({"log.flush.interval.messages": 1})
    topic = "crash-sigkill-stream"
    create_topic(broker.bootstrap, topic)
    recs = make_records(200_000, "sk")
    acked: dict[int, int] = {}
    failed: list[int] = []

    def on_delivery(err: ck.KafkaError | None, msg: ck.Message) -> None:
        i = index_of(msg.key())
        if err is None:
            acked[i] = msg.offset()
        else:
            failed.append(i)

    producer = confluent_producer(
        broker.bootstrap, linger_ms=1, message_timeout_ms=5000, request_timeout_ms=3000
    )
    killed_at = None
    i = 0
    while i < len(recs) and (killed_at is None or i < killed_at + SENT_AFTER_KILL):
        r = recs[i]
        try:
            producer.produce(
                topic,
                value=r.value,
                key=r.key,
                headers=r.headers or None,
                timestamp=r.timestamp,
                partition=0,
                on_delivery=on_delivery,
            )
            i += 1
        except BufferError:
            producer.poll(0.01)
        producer.poll(0)
        if killed_at is None and len(acked) >= KILL_AFTER_ACKS:
            broker.kill()
            killed_at = i
    assert killed_at is not None, f"only {len(acked)} acks for {len(recs)} records"
    assert producer.flush(60) == 0, "delivery reports still outstanding after 60 s"
    assert acked, "no record was acknowledged"

    broker.restart()
    got = confluent_consume(broker.bootstrap, topic)
    indices = _assert_prefix_of_stream(got, recs)
    by_index = dict(zip(indices, (g.offset for g in got), strict=True))
    lost = [i for i in sorted(acked) if by_index.get(i) != acked[i]]
    assert not lost, (
        f"{len(lost)} acknowledged records missing or moved after restart, first: "
        f"record {lost[0]} acked at offset {acked[lost[0]]}, now at {by_index.get(lost[0])}"
    )
    assert kafka_python_consume(broker.bootstrap, topic) == got

    end = len(got)
    assert confluent_watermarks(broker.bootstrap, topic) == (0, end)
    assert _produce_one_more(broker, topic, "after") == end
    assert [g.offset for g in confluent_consume(broker.bootstrap, topic, start=end)] == [end]


def _fill_in_batches(broker: BrokerProcess, topic: str, batches: int, per_batch: int) -> list[Rec]:
    """Produce uncompressed records in separate flushes, so the segment holds many batches."""
    recs = make_records(batches * per_batch, "dm")
    for b in range(batches):
        chunk = recs[b * per_batch : (b + 1) * per_batch]
        offsets = confluent_produce(broker.bootstrap, topic, chunk, "none")
        assert offsets == list(range(b * per_batch, (b + 1) * per_batch))
    return recs


def _assert_cut_logged(broker: BrokerProcess, topic: str, cut_offset: int) -> None:
    """Some log line since the restart names the partition, the cut offset and the cut."""
    words = re.compile(r"truncat|cut|corrupt|torn|invalid|discard", re.IGNORECASE)
    lines = broker.output(since_last_start=True).splitlines()
    hits = [ln for ln in lines if topic in ln and str(cut_offset) in ln and words.search(ln)]
    assert hits, (
        f"no log line names {topic}, offset {cut_offset} and what was cut; output was:\n"
        + "\n".join(lines[-40:])
    )


def _segment_and_batch_of(log_dir, topic: str, offset: int):
    """The segment file holding ``offset`` and the span of the batch starting there."""
    for segment in segment_files(log_dir, topic):
        for span in batch_spans(segment):
            if span.base_offset == offset:
                return segment, span
    raise AssertionError(f"no batch of {topic} starts at offset {offset}")


def _assert_readers_see_all_but(
    broker: BrokerProcess, topic: str, recs: list[Rec], gone: range
) -> None:
    """Both clients read every record but ``gone``, each at its own offset."""
    left = [i for i in range(len(recs)) if i not in gone]
    got = confluent_consume(broker.bootstrap, topic, len(left))
    assert [g.offset for g in got] == left
    for have in got:
        want = recs[have.offset]
        assert (have.key, have.value or b"", have.headers, have.timestamp) == (
            want.key,
            want.value or b"",
            want.headers,
            want.timestamp,
        ), f"offset {have.offset} holds another record than the one written there"
    assert kafka_python_consume(broker.bootstrap, topic, len(left)) == got
    assert confluent_watermarks(broker.bootstrap, topic) == (0, len(recs))


def _assert_hole_listed(broker: BrokerProcess, topic: str, gone: range) -> None:
    listed = run_epochlog("quarantine", "list", "--log-dirs", str(broker.log_dir))
    wanted = f"{topic}-0: offsets {gone.start}..{gone.stop - 1}"
    assert wanted in listed.stdout, listed.stdout + listed.stderr


@pytest.mark.parametrize("damage", ["flipped-byte", "segment-cut-short"])
def test_damage_to_an_old_segment_costs_only_its_batches_and_no_offset_is_reused(
    broker_factory: BrokerFactory, damage: str
) -> None:
    """600 records in batches of 3 over several segments, a clean shutdown, then one
    flipped byte in the batch of offsets 120..122 (or the segment holding offset 201 cut
    short inside that batch): every other record stays readable at its own offset, the
    damaged ones are a hole named by `epochlog quarantine list`, and the next record
    gets offset 600 (on main it got the first damaged offset again)."""
    broker = broker_factory()
    topic = f"damaged-old-{damage}"
    create_topic(broker.bootstrap, topic, config={"segment.bytes": "8192"})
    recs = _fill_in_batches(broker, topic, batches=200, per_batch=3)
    broker.stop()
    if damage == "flipped-byte":
        segment, victim = _segment_and_batch_of(broker.log_dir, topic, 120)
        flip_bytes(segment, victim.position + 61 + (victim.size - 61) // 2)
        gone = range(120, 123)
    else:
        segment, victim = _segment_and_batch_of(broker.log_dir, topic, 201)
        cut_file(segment, victim.position + victim.size // 2)
        later = [s for s in segment_files(broker.log_dir, topic) if s.name > segment.name]
        assert later, "the damaged segment must not be the last"
        gone = range(201, int(later[0].name.removesuffix(".log")))
    assert segment != segment_files(broker.log_dir, topic)[-1]

    broker.restart()
    _assert_readers_see_all_but(broker, topic, recs, gone)
    _assert_hole_listed(broker, topic, gone)
    assert _produce_one_more(broker, topic, "after") == 600


@pytest.mark.parametrize("damage", ["flipped-bytes", "cut-mid-batch"])
def test_damage_to_the_last_segment_after_a_crash_keeps_every_offset_taken(
    broker_factory: BrokerFactory, damage: str
) -> None:
    """A crash, then damage in the middle of the last segment: flipped bytes are a hole
    of that batch; a file cut short loses the batches after the cut, whose offsets the
    log's offset floor (written within a second) keeps taken: a hole of missing offsets.
    Recovery re-validates what was not flushed, as Kafka does, and logs what it cut."""
    broker = broker_factory()
    topic = f"crash-damaged-{damage}"
    create_topic(broker.bootstrap, topic)
    recs = _fill_in_batches(broker, topic, batches=12, per_batch=250)
    time.sleep(2)  # the offset floor is written once a second
    broker.kill()

    (segment,) = segment_files(broker.log_dir, topic)[-1:]
    spans = batch_spans(segment)
    assert len(spans) >= 4, f"expected several batches in {segment}, found {len(spans)}"
    victim = spans[len(spans) // 2]
    if damage == "flipped-bytes":
        # Inside the records section, past the 61-byte batch header.
        flip_bytes(segment, victim.position + 61 + (victim.size - 61) // 2)
        gone = range(victim.base_offset, victim.base_offset + 250)
    else:
        cut_file(segment, victim.position + victim.size // 2)
        gone = range(victim.base_offset, len(recs))

    broker.restart()
    _assert_readers_see_all_but(broker, topic, recs, gone)
    _assert_hole_listed(broker, topic, gone)
    if damage == "cut-mid-batch":
        _assert_cut_logged(broker, topic, victim.base_offset)
    assert _produce_one_more(broker, topic, "after") == len(recs)


def test_damage_after_a_clean_shutdown_is_found_by_the_first_read_and_never_served(
    broker_factory: BrokerFactory,
) -> None:
    """After a clean shutdown nothing is re-validated at startup (as in Kafka): the
    damaged batch is CRC-checked the first time a read reaches it, and becomes a hole;
    a read inside it waits for a copy that has it, or here, the only copy, steps over it."""
    broker = broker_factory()
    topic = "clean-then-damaged"
    create_topic(broker.bootstrap, topic)
    recs = _fill_in_batches(broker, topic, batches=12, per_batch=250)
    broker.stop()
    (segment,) = segment_files(broker.log_dir, topic)[-1:]
    spans = batch_spans(segment)
    victim = spans[len(spans) // 2]
    flip_bytes(segment, victim.position + 61 + (victim.size - 61) // 2)

    broker.restart()
    gone = range(victim.base_offset, victim.base_offset + 250)
    _assert_readers_see_all_but(broker, topic, recs, gone)
    _assert_hole_listed(broker, topic, gone)
    assert _produce_one_more(broker, topic, "after") == len(recs)
