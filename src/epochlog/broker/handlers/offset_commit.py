"""OffsetCommit (v2-v8): committed offsets with their leader epoch (v6+, KIP-320).

The retention time of v2-v4 is ignored (KIP-211: the broker's retention decides).
Partitions of topics or partitions that do not exist get UNKNOWN_TOPIC_OR_PARTITION
and nothing is stored for them. Each commit carries the partition's latest leader epoch
for KIP-232's re-created-topic check (coordinator/commits.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from kafka.protocol.consumer import OffsetCommitResponse

from epochlog.broker.handlers.context import HandlerContext
from epochlog.coordinator.commits import CommitRequest, is_from_earlier_topic
from epochlog.protocol.apis import ApiKey, RequestFrame, api
from epochlog.protocol.errors import ErrorCode
from epochlog.security.api_rules import allowed, refusal
from epochlog.security.session import Session

API = api(ApiKey.OFFSET_COMMIT, 2, 8)

Resp = OffsetCommitResponse.OffsetCommitResponseTopic


def commit_requests(
    broker: HandlerContext,
    topics: Any,
    with_epoch: bool,
    refused: Callable[[str], ErrorCode],
) -> tuple[dict[tuple[str, int], CommitRequest], dict[tuple[str, int], ErrorCode], list[Any]]:
    """The offsets a commit request asks for (with their leader epochs when the version
    carries them), the answers already known (the group or a topic refused by
    ``refused``, unknown partitions) and the order."""
    wanted: dict[tuple[str, int], CommitRequest] = {}
    answers: dict[tuple[str, int], ErrorCode] = {}
    order: list[tuple[str, int]] = []
    for topic in topics or []:
        for p in topic.partitions or []:
            key = (topic.name, p.partition_index)
            order.append(key)
            code = refused(topic.name)
            if code != ErrorCode.NONE:
                answers[key] = code
                continue
            known = broker.metadata_cache.topic(topic.name)
            state = known.partitions.get(p.partition_index) if known is not None else None
            if state is None:
                answers[key] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            epoch = p.committed_leader_epoch if with_epoch else -1
            wanted[key] = CommitRequest(
                p.committed_offset, epoch, p.committed_metadata, state.leader_epoch
            )
    return wanted, answers, order


async def confirm_partition_epochs(
    broker: HandlerContext, wanted: dict[tuple[str, int], CommitRequest]
) -> dict[tuple[str, int], CommitRequest]:
    """A commit whose epoch is above the cached one is either from a re-created topic's
    predecessor or from a consumer that saw a leader change before this broker did: the
    metastore decides which, so a new leader's epoch is never taken for a re-creation.
    Asked only with the KIP-232 checks on, and only for such commits."""
    ahead = [key for key, c in wanted.items() if is_from_earlier_topic(c)]
    if not ahead or broker.cluster is None:
        return wanted
    confirmed = dict(wanted)
    stored = {name: await broker.cluster.stored_topic(name) for name in {k[0] for k in ahead}}
    for key in ahead:
        topic = stored[key[0]]
        state = topic.partitions.get(key[1]) if topic is not None else None
        # No stored state (deleted meanwhile): leave the check to the cached epoch.
        if state is not None:
            confirmed[key] = replace(wanted[key], partition_leader_epoch=state.leader_epoch)
    return confirmed


async def handle(
    broker: HandlerContext, request: Any, version: int, frame: RequestFrame, session: Session
) -> Any:
    group_refused = refusal(
        broker.authorizer, session, ApiKey.OFFSET_COMMIT, "group", request.group_id
    )

    def refused(topic: str) -> ErrorCode:
        if group_refused != ErrorCode.NONE:
            return group_refused
        if allowed(broker.authorizer, session, ApiKey.OFFSET_COMMIT, "topic", topic):
            return ErrorCode.NONE
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED

    wanted, answers, order = commit_requests(broker, request.topics, version >= 6, refused)
    if broker.coordinator.settings.reject_stale_leader_epoch:
        wanted = await confirm_partition_epochs(broker, wanted)
    if wanted or (not order and group_refused == ErrorCode.NONE):
        answers.update(
            await broker.coordinator.offsets.commit(
                request.group_id,
                request.generation_id_or_member_epoch,
                request.member_id or "",
                request.group_instance_id if version >= 7 else None,
                wanted,
            )
        )
    topics: dict[str, list[Any]] = {}
    for key in order:
        topics.setdefault(key[0], []).append(
            Resp.OffsetCommitResponsePartition(partition_index=key[1], error_code=answers[key])
        )
    return OffsetCommitResponse(
        throttle_time_ms=0,
        topics=[Resp(name=name, partitions=parts) for name, parts in topics.items()],
    )
