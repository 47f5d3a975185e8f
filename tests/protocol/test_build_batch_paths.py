"""build_batch writes header-less records on a fast path and the rest field by field:
a batch mixing both, with keys and values absent, empty and longer than the one- and
two-byte varint tables, decodes to exactly what was given, in order."""

from __future__ import annotations

import random

from epochlog.protocol.records import Record, build_batch, iter_records


def test_mixed_records_decode_to_what_was_given() -> None:
    rnd = random.Random(7)

    def blob() -> bytes | None:
        size = rnd.choice([None, 0, 1, 63, 64, 100, 8191, 8192, 20000])
        return None if size is None else rnd.randbytes(size)

    given = []
    for i in range(9000):  # offset deltas past the varint table too
        headers = [] if i % 4 else [("h", blob()), ("k2", b"v")]
        given.append((blob(), blob(), headers, 1_700_000_000_000 + rnd.randint(-20000, 20000)))
    got = list(iter_records(build_batch(given, base_offset=10)))
    assert [(r.key, r.value, r.headers, r.timestamp) for r in got] == given
    assert [r.offset for r in got] == list(range(10, 9010))


def test_record_objects_and_tuples_encode_alike() -> None:
    tuples = [(None, b"a", [], 5), (b"k", b"b", [("x", None)], 6), (b"k", None, [], None)]
    objects = [Record(0, t if t is not None else 9, k, v, h) for k, v, h, t in tuples]
    assert build_batch(tuples, now_ms=9) == build_batch(objects)
