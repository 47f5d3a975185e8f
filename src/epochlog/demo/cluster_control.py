"""The demo's local cluster: the brokers of ``epochlog up`` (same command, same data
layout), plus what the story needs that ``up`` does not: real signals to pause, kill
and restart one broker, and a topic created with an explicit replica assignment so
the replica that will lag never leads."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from kafka.protocol.admin import CreateTopicsRequest

from epochlog.client.admin import DEBUGGING_REPLICA_ID, LATEST, AsyncAdmin, ClusterInfo
from epochlog.protocol.errors import ErrorCode, KafkaError
from epochlog.seams.real import real_seams
from epochlog.tools import local_security
from epochlog.tools.local_cluster import LocalCluster, start_broker, wait_listening

# Failures are noticed within seconds, but the paused replica stays registered while
# it is stopped (its session outlives the pause): it comes back as the same broker.
DEMO_BROKER_SETTINGS = {
    "zookeeper.session.timeout.ms": "30000",
    "replica.lag.time.max.ms": "3000",
    "replica.fetch.wait.max.ms": "100",
    "auto.create.topics.enable": "false",
    "leader.imbalance.check.interval.seconds": "3600",
    "log.flush.interval.messages": "1",
}
# A hang guard on one request to the cluster, never a judgement of speed.
REQUEST_BOUND_S = 15.0


class DemoError(RuntimeError):
    """A step of the demo did not happen within its generous bound."""


def wait_for(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    """Poll ``condition`` (errors count as not yet) until true; DemoError after the bound."""
    deadline = time.monotonic() + timeout_s
    last: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            if condition():
                return
        except (TimeoutError, OSError, KafkaError, KeyError, IndexError) as exc:
            last = exc
        time.sleep(0.2)
    raise DemoError(f"timed out after {timeout_s:.0f} s waiting for {what} (last error: {last})")


async def _with_admin(
    bootstrap: str, security: Mapping[str, str], work: Callable[[AsyncAdmin], Any]
) -> Any:
    admin = AsyncAdmin({"bootstrap.servers": bootstrap, **security}, real_seams())
    try:
        return await asyncio.wait_for(work(admin), REQUEST_BOUND_S)
    finally:
        await admin.close()


class DemoCluster:
    """Three (or N) broker processes of ``epochlog up`` that the demo can signal."""

    def __init__(self, data_dir: str, brokers: int, base_port: int, secure: bool = False) -> None:
        self.local = LocalCluster(data_dir, brokers, base_port, dict(DEMO_BROKER_SETTINGS))
        if secure:  # SASL_SSL only, as `epochlog up --secure`
            os.makedirs(data_dir, exist_ok=True)
            self.local.security = local_security.prepare(data_dir, self.local.metastore)
        self.processes: dict[int, subprocess.Popen] = {}
        self.paused: set[int] = set()

    @property
    def bootstrap(self) -> str:
        return self.local.bootstrap

    @property
    def client(self) -> dict[str, str]:
        """What the demo's clients need: the bootstrap servers and, secured, the rest."""
        return self.local.client_settings

    @property
    def _security(self) -> dict[str, str]:
        return self.local.security.client if self.local.security else {}

    def address(self, broker: int) -> str:
        return f"127.0.0.1:{self.local.base_port + broker}"

    def log_dir(self, broker: int) -> str:
        return os.path.join(self.local.data_dir, f"broker-{broker}")

    def log_dirs(self) -> list[str]:
        return [self.log_dir(b) for b in range(self.local.brokers)]

    def live(self) -> list[int]:
        return [
            b
            for b, p in sorted(self.processes.items())
            if p.poll() is None and b not in self.paused
        ]

    def live_bootstrap(self) -> str:
        return ",".join(self.address(b) for b in self.live())

    def start(self) -> None:
        os.makedirs(self.local.data_dir, exist_ok=True)
        for broker in range(self.local.brokers):
            self.processes[broker] = start_broker(self.local, broker)
        for broker, process in self.processes.items():
            wait_listening(self.local.base_port + broker, process, 60)
        everyone = set(range(self.local.brokers))
        wait_for(
            lambda: (
                self.describe().controller_id >= 0
                and all(everyone <= set(self.describe(via=b).brokers) for b in everyone)
            ),
            60,
            "a controller and every broker registered",
        )

    def describe(self, topic: str | None = None, via: int | None = None) -> ClusterInfo:
        bootstrap = self.address(via) if via is not None else self.live_bootstrap()
        return asyncio.run(
            _with_admin(
                bootstrap, self._security, lambda a: a.describe_cluster([topic] if topic else None)
            )
        )

    def partitions(self, topic: str, via: int | None = None) -> list[Any]:
        info = self.describe(topic, via).topics[topic]
        if info.error:
            raise KeyError(f"{topic}: {info.error}")
        return info.partitions

    def log_end(self, broker: int, topic: str, partition: int) -> int:
        """A replica's own log end, asked as a tool does (any replica answers)."""

        async def ask(admin: AsyncAdmin) -> int:
            await admin.describe_cluster([topic])
            offset, _ = await admin.list_offset(
                broker, topic, partition, LATEST, DEBUGGING_REPLICA_ID
            )
            return offset

        return int(asyncio.run(_with_admin(self.address(broker), self._security, ask)))

    def high_watermark(self, topic: str, partition: int) -> int:
        """What the partition's leader lets consumers read up to."""

        async def ask(admin: AsyncAdmin) -> int:
            info = await admin.describe_cluster([topic])
            leader = info.topics[topic].partitions[partition].leader
            offset, _ = await admin.list_offset(leader, topic, partition, LATEST)
            return offset

        return int(asyncio.run(_with_admin(self.live_bootstrap(), self._security, ask)))

    def create_topic(
        self, name: str, assignment: list[list[int]], configs: dict[str, str]
    ) -> uuid.UUID:
        """CreateTopics with an explicit assignment (leader first); waits for leaders."""
        topic = CreateTopicsRequest.CreatableTopic
        request = CreateTopicsRequest(
            topics=[
                topic(
                    name=name,
                    num_partitions=-1,
                    replication_factor=-1,
                    assignments=[
                        topic.CreatableReplicaAssignment(partition_index=i, broker_ids=replicas)
                        for i, replicas in enumerate(assignment)
                    ],
                    configs=[
                        topic.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()
                    ],
                )
            ],
            timeout_ms=30000,
            validate_only=False,
        )

        async def create(admin: AsyncAdmin) -> uuid.UUID:
            (result,) = (await (await admin._any()).send(request, 7)).topics
            if result.error_code:
                raise KafkaError(ErrorCode(result.error_code), result.error_message or name)
            return result.topic_id

        topic_id = asyncio.run(_with_admin(self.live_bootstrap(), self._security, create))
        wait_for(
            lambda: [p.leader for p in self.partitions(name)] == [r[0] for r in assignment],
            60,
            f"the leaders of {name}",
        )
        for index, replicas in enumerate(assignment):
            wait_for(
                lambda i=index: self.high_watermark(name, i) >= 0,
                60,
                f"broker {replicas[0]} to serve {name}-{index}",
            )
        return topic_id

    def pause(self, broker: int) -> None:
        """SIGSTOP: alive and registered, but it answers and fetches nothing."""
        self.processes[broker].send_signal(signal.SIGSTOP)
        self.paused.add(broker)

    def resume(self, broker: int) -> None:
        self.processes[broker].send_signal(signal.SIGCONT)
        self.paused.discard(broker)

    def kill(self, broker: int) -> None:
        """SIGKILL: the broker dies without a word (no controlled shutdown, no flush)."""
        process = self.processes[broker]
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
            process.wait(30)
        self.paused.discard(broker)

    def restart(self, broker: int) -> None:
        self.processes[broker] = start_broker(self.local, broker)
        wait_listening(self.local.base_port + broker, self.processes[broker], 60)

    def stop(self, clean: bool = True) -> None:
        """SIGTERM every broker (a clean stop), SIGKILL what is still running after 20 s
        (the last brokers' controlled shutdown has nobody to hand leadership to);
        ``clean=False`` SIGKILLs them at once."""
        for broker in list(self.paused):
            self.resume(broker)
        for process in self.processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM if clean else signal.SIGKILL)
        deadline = time.monotonic() + 20
        for process in self.processes.values():
            try:
                process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(30)
