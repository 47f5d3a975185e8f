"""Kafka's measure of a rate for quotas, as its metrics library computes it
(``SampledStat``, ``WindowedSum``, ``Rate.windowSize``) and the throttle time derived
from it (``QuotaUtils.throttleTime``). Times are milliseconds; no I/O.

Values are summed into samples of ``window_ms`` each (``quota.window.size.seconds``),
``samples`` of them (``quota.window.num``) plus the one being filled. The rate is their
sum over the time since the oldest sample began, counted as at least ``samples - 1``
whole windows: a new client is measured as if it had been quiet before, so its first
burst of up to (samples - 1) windows' worth of quota passes, then it is held to the
quota. A sample whose last value is ``samples`` windows old is reset."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(slots=True)
class _Sample:
    start_ms: int
    last_event_ms: int
    value: float = 0.0
    events: int = 0

    def reset(self, now_ms: int) -> None:
        self.start_ms = self.last_event_ms = now_ms
        self.value = 0.0
        self.events = 0


class WindowedRate:
    """Kafka's ``Rate`` over a ``WindowedSum``, in units per second."""

    __slots__ = ("_samples", "_current", "_count", "_window_ms")

    def __init__(self, samples: int, window_ms: int) -> None:
        self._samples: list[_Sample] = []
        self._current = 0
        self._count = samples
        self._window_ms = window_ms

    def record(self, value: float, now_ms: int) -> None:
        sample = self._current_sample(now_ms)
        if now_ms - sample.start_ms >= self._window_ms:
            sample = self._advance(now_ms)
        sample.value += value
        sample.events += 1
        sample.last_event_ms = now_ms

    def measure(self, now_ms: int) -> float:
        """The rate per second (``Rate.measure``)."""
        self._purge(now_ms)
        total = sum(s.value for s in self._samples)
        return total / (self.window_ms(now_ms) / 1000)

    def window_ms(self, now_ms: int) -> int:
        """The span the rate is taken over (``Rate.windowSize``)."""
        self._purge(now_ms)
        elapsed = now_ms - self._oldest(now_ms).start_ms
        full_windows = elapsed // self._window_ms
        if full_windows < self._count - 1:
            elapsed += (self._count - 1 - full_windows) * self._window_ms
        return max(elapsed, 1)

    def _current_sample(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms, now_ms))
        return self._samples[self._current]

    def _advance(self, now_ms: int) -> _Sample:
        # One sample more than configured: the one overlapping the window's start.
        self._current = (self._current + 1) % (self._count + 1)
        if self._current >= len(self._samples):
            sample = _Sample(now_ms, now_ms)
            self._samples.append(sample)
            return sample
        sample = self._samples[self._current]
        sample.reset(now_ms)
        return sample

    def _oldest(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms, now_ms))
        return min(self._samples, key=lambda s: s.start_ms)

    def _purge(self, now_ms: int) -> None:
        expire = self._count * self._window_ms
        for sample in self._samples:
            if now_ms - sample.last_event_ms >= expire:
                sample.reset(now_ms)


def throttle_time_ms(measured: float, bound: float, window_ms: int) -> int:
    """How long the client must stay quiet for ``measured`` (over a span of
    ``window_ms``) to fall back to ``bound``: X with O * W / (W + X) = T, X = (O - T)/T * W,
    rounded as Java's Math.round."""
    return math.floor((measured - bound) / bound * window_ms + 0.5)
