"""docs/settings.md: every registry, broker to client, rendered (``epochlog settings``)."""

from __future__ import annotations

from epochlog.client.config import ADMIN, CONSUMER, PRODUCER
from epochlog.settings.broker import BROKER
from epochlog.settings.dynamic import DYNAMIC
from epochlog.settings.reference import render
from epochlog.settings.topic import TOPIC

REGISTRIES = (BROKER, TOPIC, PRODUCER, CONSUMER, ADMIN)


def reference() -> str:
    return render(REGISTRIES, {BROKER.title: DYNAMIC})
