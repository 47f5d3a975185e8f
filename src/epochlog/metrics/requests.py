"""Kafka's RequestMetrics: requests per API and version, their total time, the error
codes they answered; and epochlog's own counts of the answers its story is about
(fenced leader epochs, KIP-207's OFFSET_NOT_AVAILABLE). Counted in one place: the
request channel, once per answered request."""

from __future__ import annotations

from collections.abc import Iterable

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
            "Time from a request's frame read to its answer written, in milliseconds "
            "(Kafka's TotalTimeMs), by API.",
            ["request"],
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

    def answered(
        self, request: str, version: int, elapsed_ms: float, errors: Iterable[int]
    ) -> None:
        """One answered request: its API name, version, time, and the error codes its
        answer carries (one per partition or resource)."""
        self.requests.labels(request, str(version)).inc()
        self.total_time.labels(request).observe(elapsed_ms)
        for code in errors:
            name = _error_name(code)
            self.errors.labels(request, name).inc()
            if code in FENCING_ERRORS:
                self.fenced.labels(request, name).inc()
            elif code == ErrorCode.OFFSET_NOT_AVAILABLE:
                self.offset_not_available.labels(request).inc()


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)
