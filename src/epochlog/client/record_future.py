"""What ``AsyncProducer.send`` hands back per record: a future that asyncio takes as its
own (``await``, ``gather``, ``wait``, ``wait_for``, ``shield``, a Task awaiting it),
made for a producer that answers thousands of records at once.

An ``asyncio.Future`` per record cost 7 us of CPU a record at 300,000 records, more
than half of it in the cyclic collector: a pending future, the context each done
callback copies and the handle that runs it all live until the batch is answered, so
all of them reach the oldest generation and every full pass walks the backlog. Here
the state of a batch's records lives in one ``RecordOutcomes``, which keeps done
callbacks in two lists (positions and functions: no object per record), and a
``RecordFuture`` is only a view of one record in it: dropped at once by a caller that
only added a callback, and made again to be passed to that callback.

Differences from asyncio.Future, all of them unseen by asyncio itself:
- The future a callback receives is equal to the one ``send`` returned (same record,
  same hash), not the same object.
- A callback added without a context runs in the producer's context, not in a copy of
  the caller's: one loop callback runs all of a batch's, in record order. A Task's
  wakeup, which comes with its context, gets a handle of its own, as from asyncio.
- Cancelling a record's future does not unsend the record (nor does Kafka's producer).
A done callback that raises goes to the loop's exception handler, as asyncio's do."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Generator
from contextvars import Context
from typing import Any, Generic, TypeVar

T = TypeVar("T")
Callback = Callable[["RecordFuture[Any]"], object]


class RecordOutcomes(Generic[T]):
    """Whether a batch's records are answered, how, and what waits for them."""

    __slots__ = (
        "loop",
        "answered",
        "error",
        "_answers",
        "_positions",
        "_callbacks",
        "_found",
        "_with_context",
        "_cancelled",
    )

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.answered = False
        self.error: BaseException | None = None
        # A record's answer by its position, once answered; it must not hold the batch,
        # whose records a future kept by the caller would keep alive.
        self._answers: Callable[[int], T] | None = None
        # Callbacks added without a context, and their records' positions: two lists,
        # no object per callback. None in _callbacks: removed.
        self._positions: list[int] = []
        self._callbacks: list[Callback | None] = []
        # Where each position's callbacks are in those lists, made by the first removal
        # (asyncio removes callbacks on timeouts and cancellations, and wait() removes
        # its own from every future it waited for).
        self._found: dict[int, list[int]] | None = None
        # A Task's wakeup, and anything else added with a context, by position.
        self._with_context: dict[int, list[tuple[Callback, Context]]] = {}
        self._cancelled: set[int] | None = None

    def future(self, position: int) -> RecordFuture[T]:
        return RecordFuture((self, position))

    def settle(self, error: BaseException | None, answers: Callable[[int], T] | None) -> None:
        """Every record is answered: with ``error``, or else with ``answers(position)``."""
        if self.answered:
            return
        self.answered, self.error, self._answers = True, error, answers
        if self._callbacks:
            self.loop.call_soon(self._call_back)
        with_context, self._with_context = self._with_context, {}
        for position, callbacks in with_context.items():
            for fn, context in callbacks:
                self.loop.call_soon(fn, RecordFuture((self, position)), context=context)

    def _call_back(self) -> None:
        callbacks, positions = self._callbacks, self._positions
        self._callbacks, self._positions, self._found = [], [], None
        for fn, position in zip(callbacks, positions, strict=True):
            if fn is not None:  # call(), inline: a call a record is a tenth of the cost
                try:
                    fn(RecordFuture((self, position)))
                except (SystemExit, KeyboardInterrupt):
                    raise
                except BaseException as exc:
                    _report(fn, exc, RecordFuture((self, position)))

    def _is_cancelled(self, position: int) -> bool:
        return self._cancelled is not None and position in self._cancelled

    def _add(self, position: int, fn: Callback, context: Context | None) -> None:
        if context is not None:
            self._with_context.setdefault(position, []).append((fn, context))
            return
        if self._found is not None:
            self._found.setdefault(position, []).append(len(self._callbacks))
        self._positions.append(position)
        self._callbacks.append(fn)

    def _remove(self, position: int, fn: Callback | None) -> list[tuple[Callback, Context | None]]:
        """Take out ``position``'s callbacks (``fn``'s only, unless None); what they were."""
        if self._found is None:
            self._found = {}
            for i, p in enumerate(self._positions):
                self._found.setdefault(p, []).append(i)
        taken: list[tuple[Callback, Context | None]] = []
        callbacks = self._callbacks
        for i in self._found.get(position, ()):
            f = callbacks[i]
            if f is not None and (fn is None or f == fn):
                callbacks[i] = None
                taken.append((f, None))
        kept = []
        for f, c in self._with_context.pop(position, []):
            (taken if fn is None or f == fn else kept).append((f, c))
        if kept:
            self._with_context[position] = kept
        return taken

    def _cancel(self, position: int) -> list[tuple[Callback, Context | None]]:
        if self._cancelled is None:
            self._cancelled = set()
        self._cancelled.add(position)
        return self._remove(position, None)


def _report(fn: Callback, exc: BaseException, future: RecordFuture[Any]) -> None:
    """A done callback raised: to the loop's exception handler, as asyncio does."""
    future.get_loop().call_exception_handler(
        {"message": f"Exception in callback {fn!r}", "exception": exc, "future": future}
    )


class RecordFuture(tuple, Generic[T]):  # type: ignore[type-arg]
    """One record's outcome: a view of its position in a ``RecordOutcomes``, made as
    ``RecordFuture((outcomes, position))``.

    A tuple so that making one runs no Python code (two are made a record: the one
    ``send`` returns, the one its callback receives): 160 ns against 300 for a class
    with ``__init__``. Only the tuple's storage is used: equality and iteration are the
    future's own, and ``_asyncio_future_blocking`` is the class's False until asyncio
    sets it on the future it awaits (the instance's dict is made then)."""

    _asyncio_future_blocking = False

    def __eq__(self, other: object) -> bool:
        return type(other) is RecordFuture and other[0] is self[0] and other[1] == self[1]

    def __ne__(self, other: object) -> bool:
        return not self == other  # (tuple's would differ from __eq__ for a plain tuple)

    __hash__ = tuple.__hash__  # (outcomes, position), as equality

    def __repr__(self) -> str:
        state = "cancelled" if self.cancelled() else "finished" if self.done() else "pending"
        return f"<RecordFuture {state} position={self[1]}>"

    def get_loop(self) -> asyncio.AbstractEventLoop:
        return self[0].loop  # type: ignore[no-any-return]

    def done(self) -> bool:
        outcomes = self[0]
        return outcomes.answered or outcomes._is_cancelled(self[1])  # type: ignore[no-any-return]

    def cancelled(self) -> bool:
        return self[0]._is_cancelled(self[1])  # type: ignore[no-any-return]

    def result(self) -> T:
        outcomes, position = self[0], self[1]
        if outcomes._is_cancelled(position):
            raise asyncio.CancelledError()
        if not outcomes.answered:
            raise asyncio.InvalidStateError("Result is not ready.")
        if outcomes.error is not None:
            raise outcomes.error
        return outcomes._answers(position)  # type: ignore[no-any-return]

    def exception(self) -> BaseException | None:
        outcomes = self[0]
        cancelled = outcomes._cancelled  # _is_cancelled, inline: read once a record
        if cancelled is not None and self[1] in cancelled:
            raise asyncio.CancelledError()
        if not outcomes.answered:
            raise asyncio.InvalidStateError("Exception is not set.")
        return outcomes.error  # type: ignore[no-any-return]

    def add_done_callback(self, fn: Callback, *, context: Context | None = None) -> None:
        outcomes, position = self[0], self[1]
        cancelled = outcomes._cancelled
        if outcomes.answered or (cancelled is not None and position in cancelled):
            outcomes.loop.call_soon(fn, self, context=context)
        elif context is None and outcomes._found is None:  # RecordOutcomes._add, inline
            outcomes._positions.append(position)
            outcomes._callbacks.append(fn)
        else:
            outcomes._add(position, fn, context)

    def remove_done_callback(self, fn: Callback) -> int:
        if self.done():
            return 0
        return len(self[0]._remove(self[1], fn))

    def cancel(self, msg: Any = None) -> bool:
        """Stops waiting for the record, which is still sent."""
        if self.done():
            return False
        for fn, context in self[0]._cancel(self[1]):
            self.get_loop().call_soon(fn, self, context=context)
        return True

    def __await__(self) -> Generator[Any, None, T]:
        if not self.done():
            self._asyncio_future_blocking = True
            yield self
        if not self.done():
            raise RuntimeError("await wasn't used with future")
        return self.result()

    __iter__ = __await__


class HeldRecord(RecordOutcomes[T]):
    """The outcome of one record that waits for its topic's metadata before it has a
    batch: answered, once placed, as a waiter of that batch is."""

    __slots__ = ()

    def done(self) -> bool:
        return self.answered

    def set_result(self, answer: T) -> None:
        self.settle(None, lambda _position: answer)

    def set_exception(self, error: BaseException) -> None:
        self.settle(error, None)
