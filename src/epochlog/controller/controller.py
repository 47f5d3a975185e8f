"""The controller: one broker at a time, elected through the metastore.

It is level-triggered: any change it watches (brokers joining or leaving, topics created,
deletion requests, ISR proposals, reassignment requests, controlled shutdowns) schedules
one reconciliation that reads the whole cluster state and writes every partition whose
state must change. Each write is a metastore transaction that also checks the controller
epoch node's version, so a controller that was deposed (its session expired, another
took over) cannot change anything; brokers in turn ignore states stamped with an older
controller epoch.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from epochlog.controller import elections, reassignment
from epochlog.metadata import layout
from epochlog.metadata.layout import IsrChangeRequest, ReassignRequest, TopicNode
from epochlog.metadata.model import PartitionState
from epochlog.metastore import (
    BadVersionError,
    Check,
    Delete,
    Metastore,
    MetastoreError,
    NodeExistsError,
    NoNodeError,
    SetData,
)
from epochlog.seams import Clock
from epochlog.seams.waiting import wait_event
from epochlog.settings.broker import BROKER
from epochlog.settings.registry import Settings, bind, bound

log = logging.getLogger("epochlog.controller")

UNINITIALIZED_EPOCH = -1
Request = TypeVar("Request", IsrChangeRequest, ReassignRequest)


@dataclass(frozen=True)
class ControllerSettings:
    unclean_leader_election_enable: bool = bound(BROKER, "unclean.leader.election.enable")
    auto_leader_rebalance_enable: bool = bound(BROKER, "auto.leader.rebalance.enable")
    leader_imbalance_check_interval_s: int = bound(
        BROKER, "leader.imbalance.check.interval.seconds"
    )

    @classmethod
    def from_settings(cls, settings: Settings) -> ControllerSettings:
        return bind(cls, settings)


class Deposed(Exception):
    """Another controller has taken over: stop acting."""


class Controller:
    def __init__(
        self, store: Metastore, broker_id: int, clock: Clock, settings: ControllerSettings
    ) -> None:
        self.store = store
        self.broker_id = broker_id
        self.clock = clock
        self.settings = settings
        self.epoch = -1
        self._epoch_version = -1
        self.active = False
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._watches: list[object] = []
        self._stopped = False
        # Leader elections this broker wrote as controller (Kafka's ControllerStats):
        # how many, the milliseconds from the start of their pass to their write, and
        # how many were unclean.
        self.leader_elections = 0
        self.leader_election_ms = 0.0
        self.unclean_leader_elections = 0

    async def start(self) -> None:
        """Contend for control; the broker's ClusterLink has created the tree already."""
        await self.store.watch_data(layout.CONTROLLER, self._on_controller_change)
        self.store.on_session_expired(self._on_session_expired)
        await self._try_to_become_controller()

    async def stop(self) -> None:
        self._stopped = True
        await self._resign()

    async def _on_controller_change(self, _event: object) -> None:
        if not self.active and not self._stopped:
            await self._try_to_become_controller()

    async def _on_session_expired(self) -> None:
        await self._resign()
        if not self._stopped:
            await self._try_to_become_controller()

    async def _try_to_become_controller(self) -> None:
        try:
            await self.store.create(
                layout.CONTROLLER, layout.encode_json({"brokerid": self.broker_id}), ephemeral=True
            )
        except NodeExistsError:
            return
        except MetastoreError as exc:
            log.warning("controller election failed: %s", exc)
            return
        try:
            data, stat = await self.store.get(layout.CONTROLLER_EPOCH)
            epoch = int(data or b"0") + 1
            new_stat = await self.store.set(
                layout.CONTROLLER_EPOCH, str(epoch).encode(), version=stat.version
            )
        except NoNodeError:
            epoch = 1
            await self.store.create(layout.CONTROLLER_EPOCH, b"1")
            new_stat = (await self.store.get(layout.CONTROLLER_EPOCH))[1]
        except MetastoreError as exc:
            log.warning("could not bump the controller epoch, resigning: %s", exc)
            await self._delete_controller_node()
            return
        self.epoch, self._epoch_version = epoch, new_stat.version
        self.active = True
        log.info("broker %d is the controller at controller epoch %d", self.broker_id, epoch)
        for path in (
            layout.BROKER_IDS,
            layout.TOPICS,
            layout.DELETE_TOPICS,
            layout.CONTROLLED_SHUTDOWN,
            layout.ISR_CHANGE,
            layout.REASSIGN_PARTITIONS,
        ):
            self._watches.append(await self.store.watch_children(path, self._poke))
        self._watches.append(
            await self.store.watch_data(layout.PREFERRED_REPLICA_ELECTION, self._poke)
        )
        self._task = asyncio.create_task(self._run())

    def _poke(self, _event: object = None) -> None:
        self._wake.set()

    def reconfigure(self, settings: ControllerSettings) -> None:
        """Dynamic broker settings changed: decide again with them (a partition left
        without a leader is elected uncleanly once unclean.leader.election.enable is
        turned on, as Kafka's controller does on that change)."""
        self.settings = settings
        self._poke()

    async def watch_topic(self, name: str) -> None:
        self._watches.append(await self.store.watch_data(layout.topic_path(name), self._poke))

    async def _resign(self) -> None:
        if not self.active:
            return
        self.active = False
        for watch in self._watches:
            watch.cancel()  # type: ignore[attr-defined]
        self._watches.clear()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self._delete_controller_node()
        log.info("broker %d resigned as controller (epoch %d)", self.broker_id, self.epoch)

    async def _delete_controller_node(self) -> None:
        with contextlib.suppress(MetastoreError):
            data, stat = await self.store.get(layout.CONTROLLER)
            if json.loads(data).get("brokerid") == self.broker_id:
                await self.store.delete(layout.CONTROLLER, version=stat.version)

    async def _run(self) -> None:
        self._wake.set()
        next_rebalance = self.clock.monotonic() + self.settings.leader_imbalance_check_interval_s
        watched_topics: set[str] = set()
        while self.active:
            timeout = max(0.0, next_rebalance - self.clock.monotonic())
            await wait_event(self.clock, self._wake, timeout)
            self._wake.clear()
            rebalance = self.clock.monotonic() >= next_rebalance
            if rebalance:
                next_rebalance = (
                    self.clock.monotonic() + self.settings.leader_imbalance_check_interval_s
                )
            try:
                topics = await self.reconcile(
                    rebalance and self.settings.auto_leader_rebalance_enable
                )
                for name in sorted(topics - watched_topics):
                    await self.watch_topic(name)
                watched_topics = topics
            except Deposed:
                log.warning("controller epoch %d was superseded; resigning", self.epoch)
                asyncio.get_running_loop().create_task(self._resign())
                return
            except MetastoreError as exc:
                log.warning("controller pass failed, retrying: %s", exc)
                await self.clock.sleep(0.2)
                self._wake.set()
            except Exception:
                # A bug met in one pass must not end the controller for good: nothing
                # would elect a leader or take an ISR change until a restart.
                log.exception("controller pass failed, retrying")
                await self.clock.sleep(1.0)
                self._wake.set()

    async def _fenced_write(self, ops: list) -> bool:
        """Apply ops only while this controller's epoch is current; False on a lost race."""
        try:
            await self.store.multi([Check(layout.CONTROLLER_EPOCH, self._epoch_version), *ops])
        except BadVersionError as exc:
            if exc.path == layout.CONTROLLER_EPOCH:
                raise Deposed from exc
            return False
        except NoNodeError:
            return False
        return True

    async def reconcile(self, preferred_election: bool = False) -> set[str]:
        """One pass over the cluster; returns the names of the topics that exist."""
        epochs = await self._live_broker_epochs()
        known, known_version = await self._known_broker_epochs()
        # A broker that restarted since the last pass (a new session owns its node) is
        # first handled as failed, as KIP-380 has it: whatever it led moves to the rest
        # of the ISR and it leaves every ISR, since a crash may have cost it records it
        # had acknowledged; then as a broker that just joined (it leads again only what
        # no one else can, at a new epoch). Only then is it taken in, so it never leads
        # on the state of its previous life.
        bounced = {b for b, epoch in epochs.items() if known.get(b, epoch) != epoch}
        # New and unchanged brokers are taken in first: one just started leads at once
        # what this pass gives it.
        known, known_version = await self._take_in(known, known_version, epochs, bounced)
        if not bounced:
            return await self._decide_topics(set(epochs), preferred_election)
        log.warning("brokers %s restarted: handled as failed, then as new", sorted(bounced))
        # Reassignments wait for the second step: one onto a restarted broker is valid.
        await self._decide_topics(set(epochs) - bounced, preferred_election, take_moves=False)
        names = await self._decide_topics(set(epochs), False)
        await self._take_in(known, known_version, epochs, set())
        return names

    async def _decide_topics(
        self, live: set[int], preferred_election: bool, take_moves: bool = True
    ) -> set[str]:
        """Decide every topic's partitions for these live brokers and write what changed;
        returns the names of the topics that exist."""
        started = self.clock.monotonic()
        shutting_down = {int(b) for b in await self.store.children(layout.CONTROLLED_SHUTDOWN)}
        requested = await self.store.exists(layout.PREFERRED_REPLICA_ELECTION)
        if requested is not None:
            preferred_election = True
        to_delete = set(await self.store.children(layout.DELETE_TOPICS))
        isr_requests = await self._read_requests(layout.ISR_CHANGE, IsrChangeRequest.decode)
        moves = (
            await self._read_requests(layout.REASSIGN_PARTITIONS, ReassignRequest.decode)
            if take_moves
            else {}
        )
        names = set(await self.store.children(layout.TOPICS))
        for name in sorted(names):
            path = layout.topic_path(name)
            try:
                data, stat = await self.store.get(path)
            except NoNodeError:
                continue
            if name in to_delete:
                await self._fenced_write(
                    [Delete(path, stat.version), Delete(f"{layout.DELETE_TOPICS}/{name}")]
                )
                log.info("deleted topic %s", name)
                continue
            node = TopicNode.decode(name, data)
            elected: list[PartitionState] = []
            changed = self._apply_moves(node, live, moves.get(name, {}))
            changed = (
                self._decide(node, live, shutting_down, preferred_election, isr_requests, elected)
                or changed
            )
            ops: list = [Delete(f"{layout.ISR_CHANGE}/{seq}") for seq in isr_requests.pop(name, {})]
            ops += [Delete(f"{layout.REASSIGN_PARTITIONS}/{seq}") for seq in moves.pop(name, {})]
            if changed:
                node.controller_epoch = self.epoch
                ops.append(SetData(path, node.encode(), stat.version))
            if ops and not await self._fenced_write(ops):
                self._wake.set()
            elif elected:
                self._count_elections(elected, started)
        for name in to_delete - names:
            await self._fenced_write([Delete(f"{layout.DELETE_TOPICS}/{name}")])
        # Proposals for topics that no longer exist are answered by their removal.
        stale = [
            Delete(f"{path}/{seq}")
            for path, pending in (
                (layout.ISR_CHANGE, isr_requests),
                (layout.REASSIGN_PARTITIONS, moves),
            )
            for requests in pending.values()
            for seq in requests
        ]
        if stale:
            await self._fenced_write(stale)
        if requested is not None:
            await self._fenced_write([Delete(layout.PREFERRED_REPLICA_ELECTION)])
        return names - to_delete

    async def _take_in(
        self, known: dict[int, int], version: int, epochs: dict[int, int], held: set[int]
    ) -> tuple[dict[int, int], int]:
        """Record the epochs of the live brokers not ``held`` in ``/brokers/epochs``;
        returns what the node holds now and its version (on a lost race, as before:
        the next pass tries again)."""
        taken_in = {**known, **{b: e for b, e in epochs.items() if b not in held}}
        if taken_in == known:
            return known, version
        data = layout.encode_broker_epochs(taken_in)
        if not await self._fenced_write([SetData(layout.BROKER_EPOCHS, data, version)]):
            self._wake.set()
            return known, version
        return taken_in, version + 1

    async def _live_broker_epochs(self) -> dict[int, int]:
        """Each registered broker's epoch: the session that owns its node."""
        epochs = {}
        for name in await self.store.children(layout.BROKER_IDS):
            stat = await self.store.exists(layout.broker_path(int(name)))
            if stat is not None:
                epochs[int(name)] = stat.ephemeral_owner
        return epochs

    async def _known_broker_epochs(self) -> tuple[dict[int, int], int]:
        data, stat = await self.store.get(layout.BROKER_EPOCHS)
        return layout.decode_broker_epochs(data), stat.version

    async def _read_requests(
        self, path: str, decode: Callable[[bytes], Request]
    ) -> dict[str, dict[str, Request]]:
        """The request nodes under ``path``, by topic, each topic's in the order filed."""
        requests: dict[str, dict[str, Request]] = {}
        for seq in sorted(await self.store.children(path)):
            try:
                data, _ = await self.store.get(f"{path}/{seq}")
            except NoNodeError:
                continue
            request = decode(data)
            requests.setdefault(request.topic, {})[seq] = request
        return requests

    def _apply_moves(
        self, node: TopicNode, live: set[int], moves: dict[str, ReassignRequest]
    ) -> bool:
        """Start or cancel the reassignments requested for ``node``'s partitions (each
        checked again against the current state); True if any changed."""
        changed = False
        for move in moves.values():
            state = node.topic.partitions.get(move.partition)
            if state is None:
                continue
            why = reassignment.refusal(state, move.replicas, live)
            if why is not None:
                log.info(
                    "reassignment of %s-%d refused: %s", node.topic.name, move.partition, why[1]
                )
                continue
            if move.replicas is None:
                new = reassignment.cancelled(state, live)
            else:
                new = reassignment.started(state, move.replicas, live)
            if new is None or new is state:
                continue
            log.info(
                "%s-%d: reassignment %s: replicas %s (adding %s, removing %s), leader %d"
                " at leader epoch %d",
                node.topic.name,
                move.partition,
                "cancelled" if move.replicas is None else "started",
                new.replicas,
                new.adding_replicas,
                new.removing_replicas,
                new.leader,
                new.leader_epoch,
            )
            node.topic.partitions[move.partition] = new
            changed = True
        return changed

    def _count_elections(self, elected: list[PartitionState], started: float) -> None:
        elapsed_ms = (self.clock.monotonic() - started) * 1000
        self.leader_elections += len(elected)
        self.leader_election_ms += elapsed_ms * len(elected)
        self.unclean_leader_elections += sum(1 for s in elected if s.elected_uncleanly)

    def _decide(
        self,
        node: TopicNode,
        live: set[int],
        shutting_down: set[int],
        preferred_election: bool,
        isr_requests: dict[str, dict[str, IsrChangeRequest]],
        elected: list[PartitionState],
    ) -> bool:
        """Change ``node``'s partitions as this cluster state asks; True if any changed.
        Each new leader's state is added to ``elected``."""
        topic = node.topic
        unclean = (
            str(
                topic.configs.get(
                    "unclean.leader.election.enable",
                    str(self.settings.unclean_leader_election_enable),
                )
            ).lower()
            == "true"
        )
        changed = False
        for request in isr_requests.get(topic.name, {}).values():
            state = topic.partitions.get(request.partition)
            if state is None:
                continue
            # A broker in controlled shutdown may not join (KIP-841's ineligible
            # replica): it would only be removed again below, and its leader would ask
            # again at once, for ever.
            new = elections.apply_isr_change(
                state,
                request.leader_epoch,
                request.partition_epoch,
                request.isr,
                live - shutting_down,
            )
            if new is not None:
                topic.partitions[request.partition] = new
                changed = True
            else:
                log.info(
                    "refused ISR change %s for %s-%d (state: epoch %d, partition epoch %d)",
                    request.isr,
                    topic.name,
                    request.partition,
                    state.leader_epoch,
                    state.partition_epoch,
                )
        for index, state in topic.partitions.items():
            new = None
            if state.leader_epoch == UNINITIALIZED_EPOCH:
                new = elections.initial_state(state.replicas, live - shutting_down)
            else:
                new = elections.on_brokers_changed(state, live, unclean, shutting_down)
                for broker in sorted(shutting_down):
                    moved = elections.move_leadership_away(
                        new or state, broker, live, shutting_down
                    )
                    new = moved or new
                if new is None and preferred_election and not state.reassigning:
                    new = elections.preferred_leader(state, live, shutting_down)
                done = reassignment.completed(new or state, live)
                if done is not None:
                    log.info(
                        "%s-%d: reassignment completed: replicas %s, isr %s, leader %d at"
                        " leader epoch %d",
                        topic.name,
                        index,
                        done.replicas,
                        done.isr,
                        done.leader,
                        done.leader_epoch,
                    )
                    new = done
            if new is not None:
                if new.leader != state.leader:
                    log.info(
                        "%s-%d: leader %d -> %d at leader epoch %d%s (isr %s)",
                        topic.name,
                        index,
                        state.leader,
                        new.leader,
                        new.leader_epoch,
                        " (unclean)" if new.elected_uncleanly else "",
                        new.isr,
                    )
                    if new.leader >= 0:
                        elected.append(new)
                topic.partitions[index] = new
                changed = True
        return changed
