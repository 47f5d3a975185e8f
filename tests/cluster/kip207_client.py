"""One client asking for the latest offset of partition 0 of a topic, as a process of its
own so that a test can freeze it (SIGSTOP) between its retries and tell its requests
from another client's. Usage: ``kip207_client.py CLIENT BOOTSTRAP TOPIC``; prints
``ready`` once the client is made, asks when a line arrives on stdin, prints the offset
the client settled on.

Each asks the way its applications do, and retries by its own rules:
confluent-kafka resets an assigned partition to its end (librdkafka's offset reset,
retried until answered; the offset is the first record it then returns), kafka-python
asks ``end_offsets`` (retried until its timeout), epochlog's admin ``list_offsets``
(retried with backoff until its timeout)."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable

LATEST = -1
TIMEOUT_S = 60
# The paused follower answers nobody: each client gives up on a request to it soon and
# asks another broker (every client keeps asking its metadata of one broker otherwise).
REQUEST_TIMEOUT_MS = 3000


def confluent_kafka_end(bootstrap: str, topic: str) -> Callable[[], int]:
    import confluent_kafka

    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "kip207",
            "enable.auto.commit": False,
            "socket.timeout.ms": REQUEST_TIMEOUT_MS,
        }
    )

    def ask() -> int:
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_END)])
        while True:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                return message.offset()

    return ask


def kafka_python_end(bootstrap: str, topic: str) -> Callable[[], int]:
    import kafka

    consumer = kafka.KafkaConsumer(
        bootstrap_servers=bootstrap, request_timeout_ms=REQUEST_TIMEOUT_MS
    )
    tp = kafka.TopicPartition(topic, 0)

    def ask() -> int:
        return consumer.end_offsets([tp], timeout_ms=TIMEOUT_S * 1000)[tp]

    return ask


def epochlog_end(bootstrap: str, topic: str) -> Callable[[], int]:
    from epochlog.client import Admin

    admin = Admin(
        {
            "bootstrap.servers": bootstrap,
            "request.timeout.ms": REQUEST_TIMEOUT_MS,
            "default.api.timeout.ms": TIMEOUT_S * 1000,
        }
    )

    def ask() -> int:
        answer = admin.list_offsets({(topic, 0): LATEST})
        return next(iter(answer.values())).offset

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
    sys.stdin.readline()
    print(f"offset {ask()}", flush=True)


if __name__ == "__main__":
    main()
