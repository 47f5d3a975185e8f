"""Kafka's RequestMetrics: requests per API and version, their total time, the error
codes they answered; and epochlog's own counts of the answers its story is about
(fenced leader epochs, KIP-207's OFFSET_NOT_AVAILABLE). Counted in one place: the
request channel, once per answered request."""

from __future__ import annotations

import collections
from collections.abc import Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram

from epochlog.protocol.errors import ErrorCode

FENCING_ERRORS = (ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH)
# Kafka's TotalTimeMs is in milliseconds; these buckets span a local produce (under a
# millisecond) to a long-polling fetch or an acks=all wait of seconds.
TOTAL_TIME_BUCKETS_MS = (0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000)


class RequestMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter(
            "kafka_network_requestmetrics_requests",
            "Requests answered, by API and version (Kafka's RequestsPerSec).",
            ["request", "version"],
            registry=registry,
        )
        self.total_time = Histogram(
            "kafka_network_requestmetrics_totaltimems",
            "Time from a request's frame read to its answer handed to the connection, in "
            "milliseconds (Kafka's TotalTimeMs), by API and version.",
            ["request", "version"],
            buckets=TOTAL_TIME_BUCKETS_MS,
            registry=registry,
        )
        self.errors = Counter(
            "kafka_network_requestmetrics_errors",
            "Error codes answered, one per partition or resource of an answer, NONE "
            "included (Kafka's ErrorsPerSec).",
            ["request", "error"],
            registry=registry,
        )
        self.fenced = Counter(
            "epochlog_fenced_requests",
            "Partitions answered FENCED_LEADER_EPOCH or UNKNOWN_LEADER_EPOCH (KIP-320): "
            "a reader or follower on another leader epoch than this broker's.",
            ["request", "error"],
            registry=registry,
        )
        self.offset_not_available = Counter(
            "epochlog_offset_not_available",
            "ListOffsets partitions answered OFFSET_NOT_AVAILABLE (KIP-207): a new "
            "leader whose high watermark has not reached its epoch's start.",
            ["request"],
            registry=registry,
        )
        # Each API and version's children, looked up once: this runs for every request.
        self._per_api: dict[tuple[str, int], tuple[Any, Any]] = {}
        self._per_error: dict[tuple[str, int], tuple[Any, ...]] = {}

    def answered(
        self,
        request: str,
        version: int,
        elapsed_ms: float,
        errors: Iterable[int],
        also_as: str | None = None,
    ) -> None:
        """One answered request: its API name, version, time, and the error codes its
        answer carries (one per partition or resource). ``also_as``: a second name its
        count and time go under too, as Kafka counts a Fetch also as FetchConsumer or
        FetchFollower."""
        for name in (request, also_as) if also_as else (request,):
            per_api = self._per_api.get((name, version)) or self._api_children(name, version)
            per_api[0].inc()
            per_api[1].observe(elapsed_ms)
        for code, count in collections.Counter(errors).items():
            for child in self._per_error.get((request, code)) or self._error_children(
                request, code
            ):
                child.inc(count)

    def _api_children(self, request: str, version: int) -> tuple[Any, Any]:
        labels = (request, str(version))
        children = (self.requests.labels(*labels), self.total_time.labels(*labels))
        self._per_api[(request, version)] = children
        return children

    def _error_children(self, request: str, code: int) -> tuple[Any, ...]:
        """The counters one error code of one API adds to."""
        name = _error_name(code)
        children = [self.errors.labels(request, name)]
        if code in FENCING_ERRORS:
            children.append(self.fenced.labels(request, name))
        elif code == ErrorCode.OFFSET_NOT_AVAILABLE:
            children.append(self.offset_not_available.labels(request))
        self._per_error[(request, code)] = found = tuple(children)
        return found


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)
