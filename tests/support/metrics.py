"""Scraping a broker's /metrics and reading it through prometheus_client's own text
parser, so every scrape in the tests also checks that the output parses."""

from __future__ import annotations

import asyncio
import urllib.request
from collections.abc import Mapping

from prometheus_client.parser import text_string_to_metric_families


class Samples:
    """The samples of one scrape, by sample name and labels."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.samples: list[tuple[str, dict[str, str], float]] = []
        self.types: dict[str, str] = {}
        for family in text_string_to_metric_families(text):
            self.types[family.name] = family.type
            for sample in family.samples:
                self.samples.append((sample.name, dict(sample.labels), sample.value))

    def matching(self, name: str, labels: Mapping[str, str]) -> list[float]:
        return [
            value
            for sample_name, sample_labels, value in self.samples
            if sample_name == name and all(sample_labels.get(k) == v for k, v in labels.items())
        ]

    def value(self, name: str, **labels: str) -> float:
        """The one sample of ``name`` with these labels (others may be present too)."""
        found = self.matching(name, labels)
        assert len(found) == 1, f"{name}{labels}: {len(found)} samples"
        return found[0]

    def total(self, name: str, **labels: str) -> float:
        """The sum over every sample of ``name`` with these labels (0 when none)."""
        return sum(self.matching(name, labels))


def scrape(port: int, path: str = "/metrics") -> Samples:
    """One GET from a broker process (blocking: for brokers in other processes)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as answer:
        assert answer.status == 200
        assert answer.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
        return Samples(answer.read().decode())


async def http_get(
    port: int, path: str = "/metrics", requests: int = 1
) -> list[tuple[int, dict[str, str], bytes]]:
    """``requests`` GETs on one kept-alive connection, from the broker's own loop (an
    in-process broker): (status, headers, body) of each."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    answers = []
    try:
        for _ in range(requests):
            writer.write(f"GET {path} HTTP/1.1\r\nHost: test\r\n\r\n".encode())
            status_line = await reader.readline()
            headers = {}
            while (line := await reader.readline()) != b"\r\n":
                name, _, value = line.decode().partition(":")
                headers[name.strip().lower()] = value.strip()
            body = await reader.readexactly(int(headers["content-length"]))
            answers.append((int(status_line.split()[1]), headers, body))
    finally:
        writer.close()
    return answers


async def scrape_async(port: int) -> Samples:
    ((status, _, body),) = await http_get(port)
    assert status == 200
    return Samples(body.decode())
