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
            await create_topic_via_metadata(conn, "t")
            for _ in range(200):
                partition = broker.replica_manager.partition("t", 0)
                if partition is not None and partition.is_leader:
                    break
                await asyncio.sleep(0.05)
            else:
                raise AssertionError("the topic got no leader after the failed pass")
            assert failed == [True]
            await conn.close()

    run(scenario)
