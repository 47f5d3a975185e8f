"""One client asking for the latest offset of partition 0 of a topic, as a process of its
own so that a test can freeze it (SIGSTOP) between its retries and tell its requests
from another client's. Usage: ``kip207_client.py CLIENT BOOTSTRAP TOPIC``; prints
``ready`` once the client is made; on each line from stdin asks and prints ``offset N``.
The first ask (before the election) also asks partition 1, so the client holds a
connection to each leader as a client long at work does.

Each asks the way its applications do, and retries by its own rules:
confluent-kafka first queries the watermarks, then resets an assigned partition to its
end (librdkafka's offset reset, retried until answered; the offset is the first record
it then returns), kafka-python asks ``end_offsets`` (retried until its timeout),
epochlog's admin ``list_offsets`` (retried with backoff until its timeout)."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable

LATEST = -1
TIMEOUT_S = 60
# The paused follower answers nobody: a client that asks it gives up soon and asks
# another broker (by default each would wait 30 to 60 s on it).
REQUEST_TIMEOUT_MS = 3000

Ask = Callable[[list[int]], int]


def confluent_kafka_end(bootstrap: str, topic: str) -> Ask:
    import confluent_kafka

    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "kip207",
            "enable.auto.commit": False,
            "socket.timeout.ms": REQUEST_TIMEOUT_MS,
            "socket.connection.setup.timeout.ms": REQUEST_TIMEOUT_MS,
            "api.version.request.timeout.ms": REQUEST_TIMEOUT_MS,
        }
    )

    def ask(partitions: list[int]) -> int:
        if len(partitions) > 1:
            ends = [
                consumer.get_watermark_offsets(
                    confluent_kafka.TopicPartition(topic, p), timeout=TIMEOUT_S, cached=False
                )[1]
                for p in partitions
            ]
            return ends[0]
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_END)])
        while True:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                return message.offset()

    return ask


def kafka_python_end(bootstrap: str, topic: str) -> Ask:
    import kafka

    consumer = kafka.KafkaConsumer(
        bootstrap_servers=bootstrap, request_timeout_ms=REQUEST_TIMEOUT_MS
    )

    def ask(partitions: list[int]) -> int:
        tps = [kafka.TopicPartition(topic, p) for p in partitions]
        return consumer.end_offsets(tps, timeout_ms=TIMEOUT_S * 1000)[tps[0]]

    return ask


def epochlog_end(bootstrap: str, topic: str) -> Ask:
    from epochlog.client import Admin

    admin = Admin(
        {
            "bootstrap.servers": bootstrap,
            "request.timeout.ms": REQUEST_TIMEOUT_MS,
            "default.api.timeout.ms": TIMEOUT_S * 1000,
        }
    )

    def ask(partitions: list[int]) -> int:
        answer = admin.list_offsets({(topic, p): LATEST for p in partitions})
        return next(a.offset for tp, a in answer.items() if tp.partition == partitions[0])

    return ask


CLIENTS = {
    "confluent-kafka": confluent_kafka_end,
    "kafka-python": kafka_python_end,
    "epochlog": epochlog_end,
}


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    client, bootstrap, topic = sys.argv[1:4]
    ask = CLIENTS[client](bootstrap, topic)
    print("ready", flush=True)
    partitions = [0, 1]
    while sys.stdin.readline():
        print(f"offset {ask(partitions)}", flush=True)
        partitions = [0]


if __name__ == "__main__":
    main()
