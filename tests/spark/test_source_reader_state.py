"""The stream reader keeps a cluster view (event loop, admin client) between Spark's
driver calls; Spark also pickles the reader for its workers, so the kept state must not
travel and must be closed by ``stop``."""

from __future__ import annotations

import asyncio
import pickle

from epochlog.spark.options import parse_options
from epochlog.spark.stream_reader import EpochlogStreamReader


def _reader() -> EpochlogStreamReader:
    options = parse_options({"bootstrap.servers": "127.0.0.1:1", "subscribe": "t"}, True)
    return EpochlogStreamReader(options)


def test_a_fresh_reader_opens_nothing_until_a_driver_call() -> None:
    reader = _reader()
    assert reader._view_made is None
    copy = pickle.loads(pickle.dumps(reader))
    assert copy._view_made is None and copy.options == reader.options


def test_the_kept_loop_does_not_travel_with_a_pickled_reader_and_stop_closes_it() -> None:
    reader = _reader()
    view = reader._view
    assert view._call(asyncio.sleep(0, result=7)) == 7
    loop = view._loop
    assert loop is not None and not loop.is_closed()
    assert view._call(asyncio.sleep(0, result=8)) == 8
    assert view._loop is loop  # one loop for every call of this reader
    copy = pickle.loads(pickle.dumps(reader))
    assert copy._view_made is not None and copy._view_made._loop is None
    reader.stop()
    assert loop.is_closed() and view._loop is None
    reader.stop()  # twice is harmless


def test_stop_ends_requests_a_failed_attempt_left_running() -> None:
    reader = _reader()
    view = reader._view
    view._call(asyncio.sleep(0))
    assert view._loop is not None
    left_running = view._loop.create_task(asyncio.sleep(3600))
    reader.stop()
    assert left_running.cancelled()
