"""KIP-219 on epochlog's client side: after a response carrying a throttle time, a
connection sends nothing to that broker until the time is over (from the response
versions Kafka's clients honour it at), on a fake connection and clock."""

from __future__ import annotations

import asyncio
import struct
from typing import Any

from kafka.protocol.metadata import MetadataRequest, MetadataResponse
from kafka.protocol.producer import ProduceRequest, ProduceResponse

from epochlog.client.connection import BrokerConnection
from epochlog.protocol.apis import ApiKey, api, encode_response


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(round(seconds, 6))
        self.now += seconds


class FakeBroker:
    """Answers each request with the next canned response, throttle time and all."""

    peer = "fake"
    peer_certificate = None

    def __init__(self, answers: list[tuple[int, int, Any]]) -> None:
        self._answers = answers
        self._incoming = bytearray()
        self._ready = asyncio.Event()
        self.sent_at: list[float] = []
        self.clock: FakeClock | None = None

    def writelines(self, parts: list[bytes]) -> None:
        payload = b"".join(bytes(p) for p in parts)[4:]
        (correlation_id,) = struct.unpack_from(">i", payload, 4)
        assert self.clock is not None
        self.sent_at.append(self.clock.now)
        key, version, response = self._answers.pop(0)
        spec = api(key, version, version)
        self._incoming += b"".join(encode_response(spec, version, correlation_id, response))
        self._ready.set()

    async def drain(self) -> None:
        return None

    async def read_exactly(self, n: int) -> bytes:
        while len(self._incoming) < n:
            self._ready.clear()
            await self._ready.wait()
        out = bytes(self._incoming[:n])
        del self._incoming[:n]
        return out

    def close(self) -> None:
        return None

    def is_closing(self) -> bool:
        return False


def _produce_answer(throttle_ms: int) -> ProduceResponse:
    return ProduceResponse(responses=[], throttle_time_ms=throttle_ms)


def _metadata_answer() -> MetadataResponse:
    return MetadataResponse(
        throttle_time_ms=0, brokers=[], cluster_id=None, controller_id=0, topics=[]
    )


def _produce() -> ProduceRequest:
    return ProduceRequest(transactional_id=None, acks=1, timeout_ms=1000, topic_data=[])


def _metadata() -> MetadataRequest:
    return MetadataRequest(topics=[], allow_auto_topic_creation=False)


def test_a_throttled_answer_holds_back_the_next_request() -> None:
    async def scenario() -> None:
        clock = FakeClock()
        broker = FakeBroker(
            [
                (ApiKey.PRODUCE, 8, _produce_answer(500)),
                (ApiKey.METADATA, 9, _metadata_answer()),
                (ApiKey.PRODUCE, 5, _produce_answer(700)),  # before KIP-219's v6
                (ApiKey.METADATA, 9, _metadata_answer()),
            ]
        )
        broker.clock = clock
        conn = BrokerConnection(broker, "app", clock)  # type: ignore[arg-type]
        await conn.send(_produce(), 8)
        assert conn.throttled_until == 100.5
        await conn.send(_metadata(), 9)
        # Sent only once the throttle time was over.
        assert clock.slept == [0.5]
        assert broker.sent_at == [100.0, 100.5]
        await conn.send(_produce(), 5)
        await conn.send(_metadata(), 9)
        assert clock.slept == [0.5], "an old version's throttle time is the broker's to enforce"
        await conn.close()

    asyncio.run(scenario())
