"""The controller's passes over the cluster, in a real broker: a pass that fails on
something other than the metastore (a bug) is logged and retried, not the end of the
controller (nothing would elect a leader or take an ISR change until a restart)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from inprocess_broker import connect, create_topic_via_metadata, run, running_broker


def test_a_controller_pass_that_fails_is_retried(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            controller = broker.controller
            assert controller is not None and controller.active
            reconcile, failed = controller.reconcile, []

            async def fails_once(*args: Any) -> set[str]:
                if not failed:
                    failed.append(True)
                    raise RuntimeError("a bug met in a pass")
                return await reconcile(*args)

            controller.reconcile = fails_once  # type: ignore[method-assign]
            conn = await connect(broker)

            async def leads(topic: str) -> bool:
                partition = broker.replica_manager.partition(topic, 0)
                return partition is not None and partition.is_leader

            await create_topic_via_metadata(conn, "t")
            # A pass already under way when the method was replaced may elect "t" before
            # the replaced one runs (a broker just started, on a busy machine): wait for
            # both, then ask for a leader once more, after the failed pass.
            for _ in range(200):
                if failed and await leads("t"):
                    break
                await asyncio.sleep(0.05)
            else:
                raise AssertionError(f"failed passes {failed}; leader of t: {await leads('t')}")
            await create_topic_via_metadata(conn, "u")
            for _ in range(200):
                if await leads("u"):
                    break
                await asyncio.sleep(0.05)
            else:
                raise AssertionError("no leader elected after the failed pass")
            assert failed == [True]
            await conn.close()

    run(scenario)
