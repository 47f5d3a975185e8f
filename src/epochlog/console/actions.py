"""The console's one action, quarantine replay, in two steps: the operator hands over a
quarantine file (its bytes live on a broker's host, which the console never reads), the
console says what it holds and where it would go, and only a second request naming that
answer's token replays it. A replay writes records again, so nothing is done on one
click or by a stray request."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from epochlog.protocol.batch import read_header
from epochlog.protocol.records import Record, iter_records
from epochlog.seams import Seams
from epochlog.tools.quarantine import batches_in, replay_records

# A proposed replay not confirmed within this long must be proposed again.
PROPOSAL_TTL_S = 300.0


@dataclass(frozen=True)
class Proposal:
    token: str
    topic: str
    partition: int
    records: list[list[Record]]  # per batch, as kept
    summary: dict[str, Any]
    expires: float


class Replays:
    """Proposed replays waiting for their confirmation."""

    def __init__(self, seams: Seams, client: Mapping[str, str]) -> None:
        self.seams = seams
        self.client = client  # the console's client settings: the replay's producer's
        self._proposals: dict[str, Proposal] = {}

    def propose(self, data: bytes, topic: str, partition: int) -> dict[str, Any]:
        """What replaying ``data`` (a quarantine .log file) into the partition would
        write, with the token that confirms it. ValueError if it holds no batches."""
        kept, offsets, epochs = [], [], set()
        for batch in batches_in(data):
            epochs.add(read_header(batch).partition_leader_epoch)
            kept.append(list(iter_records(batch)))
            offsets.extend(record.offset for record in kept[-1])
        if not offsets:
            raise ValueError("no record batches in the file")
        token = f"{self.seams.random.getrandbits(128):032x}"
        summary = {
            "token": token,
            "topic": topic,
            "partition": partition,
            "records": len(offsets),
            "first_offset": min(offsets),
            "last_offset": max(offsets),
            "epochs": sorted(epochs),
        }
        now = self.seams.clock.monotonic()
        self._proposals = {t: p for t, p in self._proposals.items() if p.expires > now}
        self._proposals[token] = Proposal(
            token, topic, partition, kept, summary, now + PROPOSAL_TTL_S
        )
        return summary

    async def confirm(self, token: str) -> str:
        """Replay a proposal once; KeyError if the token is unknown, used or expired."""
        proposal = self._proposals.pop(token)
        if proposal.expires <= self.seams.clock.monotonic():
            raise KeyError(token)
        return await replay_records(
            proposal.records,
            self.client,
            self.seams,
            proposal.topic,
            proposal.partition,
        )
