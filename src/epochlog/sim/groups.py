"""The groups workload (``--workload produce,consume,groups``): one member of a consumer
group reads every partition and commits after each poll (with the leader epochs of the
records before its positions, KIP-320); now and then the group's committed offsets and
members are asked for, as an operator's tool would, for the KIP-211 and KIP-320 checkers.
"""

from __future__ import annotations

from epochlog.client.admin import AsyncAdmin
from epochlog.client.consumer import AsyncConsumer
from epochlog.client.errors import ClientError
from epochlog.sim.checkers import Event
from epochlog.sim.loop import SimClock

GROUP = "sim-group"


async def member(consumer: AsyncConsumer, topic: str, history: list[Event]) -> None:
    """Poll and commit until cancelled; failures (rebalances, leader moves) are noted."""
    consumer.subscribe([topic])
    while True:
        try:
            if await consumer.poll(10):
                await consumer.commit()
        except ClientError as exc:
            history.append(("error", "group", type(exc).__name__))


async def watch(clock: SimClock, admin: AsyncAdmin, every_s: float, history: list[Event]) -> None:
    """Record the group's members and committed offsets (with their epochs) now and
    then: ("committed", members, ((partition, offset, epoch), ...))."""
    while True:
        await clock.sleep(every_s)
        try:
            members = len((await admin.describe_groups([GROUP]))[GROUP].members)
            offsets = await admin.list_consumer_group_offsets(GROUP)
        except ClientError as exc:
            history.append(("error", "group-watch", type(exc).__name__))
            continue
        committed = tuple((tp.partition, at.offset, at.leader_epoch) for tp, at in offsets.items())
        history.append(("committed", members, committed))
