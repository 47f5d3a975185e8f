"""Produce requests (v3–v9) encoded by hand, each partition's records left as they are:
the framed request goes out as pieces (``StreamConnection.writelines`` writes large ones
as they are). kafka.protocol's encoder copied every batch twice, into its pooled buffer
and out of it into a fresh bytearray: an eighth of a Spark sink task's CPU (py-spy),
the second copy's page faults included. tests/protocol/test_produce_request.py checks
the bytes against kafka.protocol's for every version."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

from epochlog.protocol.wire_encoding import array_len, string, uvarint

FIRST_FLEXIBLE = 9
API_KEY = 0

_HEADER = struct.Struct(">hhi")  # api_key, api_version, correlation_id
_ACKS_TIMEOUT = struct.Struct(">hi")
_I32 = struct.Struct(">i")
_NULL_CLIENT_ID = b"\xff\xff"


class EncodedProduce:
    """A Produce request for ``BrokerConnection``: what it asks of kafka.protocol's
    request classes (``API_KEY``, ``with_header``), and ``encode_framed`` in place of
    ``encode``. ``topics``: (name, [(partition, records)]), records None for null."""

    API_KEY = API_KEY

    def __init__(
        self,
        transactional_id: str | None,
        acks: int,
        timeout_ms: int,
        topics: Sequence[tuple[str, Sequence[tuple[int, Any]]]],
    ) -> None:
        self.transactional_id = transactional_id
        self.acks = acks
        self.timeout_ms = timeout_ms
        self.topics = topics
        self._correlation_id = 0
        self._client_id: str | None = None

    def with_header(self, correlation_id: int, client_id: str | None) -> None:
        self._correlation_id, self._client_id = correlation_id, client_id

    def encode_framed(self, version: int) -> list[Any]:
        """The size prefix, the header and the body, as pieces; records are not copied."""
        if not 3 <= version <= FIRST_FLEXIBLE:
            raise ValueError(f"Produce v{version} is not encoded here (v3-v9 are)")
        flexible = version >= FIRST_FLEXIBLE
        # The request header's client_id is a classic nullable string in every version.
        client_id = _NULL_CLIENT_ID if self._client_id is None else string(self._client_id, False)
        head = bytearray(_HEADER.pack(API_KEY, version, self._correlation_id))
        head += client_id
        if flexible:
            head += b"\x00"  # header tagged fields
        head += string(self.transactional_id, flexible)
        head += _ACKS_TIMEOUT.pack(self.acks, self.timeout_ms)
        head += array_len(len(self.topics), flexible)
        pieces: list[Any] = [head]
        for name, partitions in self.topics:
            head += string(name, flexible)
            head += array_len(len(partitions), flexible)
            for index, records in partitions:
                head += _I32.pack(index)
                if records is None:
                    head += b"\x00" if flexible else b"\xff\xff\xff\xff"
                else:
                    head += uvarint(len(records) + 1) if flexible else _I32.pack(len(records))
                    pieces.append(records)
                    head = bytearray()
                    pieces.append(head)
                if flexible:
                    head += b"\x00"  # partition tagged fields
            if flexible:
                head += b"\x00"  # topic tagged fields
        if flexible:
            head += b"\x00"  # body tagged fields
        pieces = [p for p in pieces if len(p)]
        pieces[0:0] = [_I32.pack(sum(len(p) for p in pieces))]
        return pieces
