"""Imported at startup by the reference broker of bench/metrics_overhead.py (its
PYTHONPATH starts here): it counts nothing. Through sitecustomize so that both brokers
run the same command, the console script, and differ only in the counting."""

from epochlog.broker import server
from epochlog.metrics.requests import RequestMetrics
from epochlog.metrics.topic_stats import BrokerTopicStats


def _nothing(*args: object, **kwargs: object) -> None:
    return None


RequestMetrics.answered = _nothing  # type: ignore[method-assign]
BrokerTopicStats.appended = _nothing  # type: ignore[method-assign]
BrokerTopicStats.fetched = _nothing  # type: ignore[method-assign]
server.error_codes = lambda *args, **kwargs: ()  # type: ignore[assignment]
