"""Settings of Kafka's stock server.properties that mean nothing here (epochlog serves
requests on one event loop, leaves socket buffers to the OS): accepted so that a Kafka
configuration starts a broker unchanged, and documented as having no effect."""

from __future__ import annotations

from epochlog.settings.registry import Setting, integer

COMPATIBILITY = "Accepted from Kafka's stock server.properties, with no effect"
_COUNT = integer(1, long=False)

COMPATIBILITY_SETTINGS = [
    Setting(name, kind, default, doc, COMPATIBILITY)
    for name, kind, default, doc in [
        ("num.network.threads", _COUNT, 3, "epochlog serves requests on one event loop."),
        ("num.io.threads", _COUNT, 8, "epochlog serves requests on one event loop."),
        (
            "num.recovery.threads.per.data.dir",
            _COUNT,
            1,
            "Recovery reads each log in turn.",
        ),
        ("socket.send.buffer.bytes", integer(-1, long=False), 102400, "The OS default is used."),
        (
            "socket.receive.buffer.bytes",
            integer(-1, long=False),
            102400,
            "The OS default is used.",
        ),
        (
            "zookeeper.connection.timeout.ms",
            integer(0, long=False),
            None,
            "The session timeout bounds the first connection.",
        ),
    ]
]
