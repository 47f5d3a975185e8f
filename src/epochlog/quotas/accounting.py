"""What each request is charged against the quotas, and how long its connection is then
muted (KIP-219: the answer goes out at once carrying ``throttle_time_ms``, then the
broker reads nothing more from that connection for that long; Kafka's clients also hold
back their next request to that broker).

- ``producer_byte_rate``: a Produce request's size (acks=0 included).
- ``consumer_byte_rate``: a consumer Fetch's answer size. A fetch over quota is answered
  empty and not charged (Kafka's way), and a fetch never asks for more than the quota's
  whole window allows (``max_value_in_window``).
- ``request_percentage``: Kafka charges the time its request-handler and network threads
  spend on a request, as a percentage of one thread (100 = a whole thread). epochlog
  serves every request on one event loop, so a request is charged the loop time spent on
  it: each step of its handler coroutine, timed from the resume to the next suspension
  (what it waits for, a long-polling Fetch's wait or an acks=all produce's replication,
  is not charged), plus its decoding before and, charged to its next request as Kafka
  does with network-thread time, its encoding and send after. 100 is then the whole
  loop, and a client's share of a busy broker is bounded as Kafka's is of its threads.
  Replica fetches, transaction markers, SASL exchanges and acks=0 produces are exempt.

The throttle time is the larger of the two a request incurs (bytes, request time).
The accounting of the request being served is reachable from its handler through
``current()`` (a context variable of the connection's task): the Fetch handler decides
whether to answer empty before it answers."""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable, Coroutine, Generator
from dataclasses import dataclass
from typing import Any, TypeVar

from epochlog.protocol.apis import ApiKey
from epochlog.quotas.entities import (
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    QuotaEntity,
)
from epochlog.quotas.manager import ClientQuotaManager
from epochlog.seams import Clock
from epochlog.settings.broker import BROKER
from epochlog.settings.registry import Settings, bind, bound

T = TypeVar("T")

# Never charged request time (Kafka: cluster actions and the SASL exchange).
EXEMPT_APIS = frozenset({ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE, ApiKey.WRITE_TXN_MARKERS})


@dataclass(frozen=True)
class QuotaSettings:
    samples: int = bound(BROKER, "quota.window.num")
    window_seconds: int = bound(BROKER, "quota.window.size.seconds")

    @classmethod
    def from_settings(cls, settings: Settings) -> QuotaSettings:
        return bind(cls, settings)


class QuotaManagers:
    """A broker's three client quota managers, fed by the quota store."""

    def __init__(self, settings: QuotaSettings, clock: Clock) -> None:
        samples, window = settings.samples, settings.window_seconds
        self.produce = ClientQuotaManager(PRODUCER_BYTE_RATE, samples, window)
        self.fetch = ClientQuotaManager(CONSUMER_BYTE_RATE, samples, window)
        self.request = ClientQuotaManager(
            REQUEST_PERCENTAGE, samples, window, max_throttle_ms=window * 1000
        )
        self._clock = clock

    def by_key(self) -> dict[str, ClientQuotaManager]:
        return {m.key: m for m in (self.produce, self.fetch, self.request)}

    def apply(self, entity: QuotaEntity, quotas: dict[str, float]) -> None:
        """One entity's quotas as now stored (an absent key: none of that type)."""
        for key, manager in self.by_key().items():
            manager.set_limit(entity, quotas.get(key))

    def now_ms(self) -> int:
        return int(self._clock.monotonic() * 1000)

    def account(self, principal: str, client_id: str | None, api_key: int) -> RequestAccount | None:
        """The accounting of one request, or None when no quota is set at all."""
        if not (self.produce.enabled or self.fetch.enabled or self.request.enabled):
            return None
        # Kafka's user is the principal's name (User:alice -> alice).
        user = principal.partition(":")[2] or principal
        return RequestAccount(self, user, client_id or "", api_key)


class RequestAccount:
    """One request's charges, from its decoding to the throttle time of its answer."""

    def __init__(self, quotas: QuotaManagers, user: str, client_id: str, api_key: int) -> None:
        self.quotas = quotas
        self.user = user
        self.client_id = client_id
        self.api_key = api_key
        self.loop_seconds = 0.0
        self.exempt = api_key in EXEMPT_APIS
        # Set by a handler that settled its own throttle (Fetch).
        self.settled: int | None = None

    def _request_throttle(self, now_ms: int) -> int:
        if self.exempt or not self.quotas.request.enabled:
            return 0
        percent = self.loop_seconds * 100
        return self.quotas.request.record(self.user, self.client_id, percent, now_ms)

    @property
    def judges_fetch(self) -> bool:
        """Whether a consumer's fetch must be judged before it is answered."""
        return self.quotas.fetch.enabled or self.quotas.request.enabled

    def fetch_cap(self) -> float:
        """The most a consumer's fetch may answer (Kafka's maxQuotaWindowBytes)."""
        return self.quotas.fetch.max_value_in_window(self.user, self.client_id)

    def settle_fetch(self, response_bytes: Callable[[], int]) -> int:
        """A consumer Fetch about to answer ``response_bytes()`` (asked only when a byte
        rate applies): its throttle time; when over a quota the answer must be empty, and
        the bytes are not charged."""
        now = self.quotas.now_ms()
        throttle = self._request_throttle(now)
        fetch = self.quotas.fetch
        if fetch.resolve(self.user, self.client_id)[1] is not None:
            size = response_bytes()
            throttle = max(throttle, fetch.record(self.user, self.client_id, size, now))
            if throttle:
                fetch.record_unchecked(self.user, self.client_id, -size, now)
        self.settled = throttle
        return throttle

    def exempt_from_requests(self) -> None:
        """A request Kafka never charges time for (a follower's fetch, acks=0)."""
        self.exempt = True

    def settle(self, request_bytes: int) -> int:
        """The throttle time of the answer (after the handler): a Produce's bytes and
        every non-exempt request's time; what a Fetch settled itself stands."""
        if self.settled is not None:
            return self.settled
        now = self.quotas.now_ms()
        throttle = self._request_throttle(now)
        if self.api_key == ApiKey.PRODUCE:
            produced = self.quotas.produce.record(self.user, self.client_id, request_bytes, now)
            throttle = max(throttle, produced)
        self.settled = throttle
        return throttle

    def charge_after(self, seconds: float) -> None:
        """Loop time spent on the request after its answer was settled (encoding and
        sending it): charged without judging, so the next request pays for it."""
        if not self.exempt and self.quotas.request.enabled and seconds > 0:
            self.quotas.request.record_unchecked(
                self.user, self.client_id, seconds * 100, self.quotas.now_ms()
            )

    async def timed(self, clock: Clock, work: Coroutine[Any, Any, T]) -> T:
        """Run ``work`` as the current request, adding the loop time of each of its steps
        to ``loop_seconds``."""
        token = _CURRENT.set(self)
        try:
            return await _Timed(work, clock, self)
        finally:
            _CURRENT.reset(token)


_CURRENT: contextvars.ContextVar[RequestAccount | None] = contextvars.ContextVar(
    "epochlog_request_account", default=None
)


def current() -> RequestAccount | None:
    """The accounting of the request this task is serving (None: no quotas are set)."""
    return _CURRENT.get()


class _Timed(Awaitable[T]):
    """Drives a coroutine step by step (as its task would), timing each step."""

    __slots__ = ("_work", "_clock", "_account")

    def __init__(self, work: Coroutine[Any, Any, T], clock: Clock, account: RequestAccount) -> None:
        self._work = work
        self._clock = clock
        self._account = account

    def __await__(self) -> Generator[Any, Any, T]:
        work, monotonic, account = self._work, self._clock.monotonic, self._account
        sent: Any = None
        thrown: BaseException | None = None
        while True:
            started = monotonic()
            try:
                yielded = work.send(sent) if thrown is None else work.throw(thrown)
            except StopIteration as done:
                account.loop_seconds += monotonic() - started
                return done.value  # type: ignore[no-any-return]
            except BaseException:
                account.loop_seconds += monotonic() - started
                raise
            account.loop_seconds += monotonic() - started
            try:
                sent, thrown = (yield yielded), None
            except GeneratorExit:
                work.close()
                raise
            except BaseException as exc:  # cancellation: handed to the work
                sent, thrown = None, exc
