"""A separate process using a metastore, for cross-process tests.

``python metastore_holder.py URI hold PATH``: create an ephemeral PATH (session timeout
1 s), print "ready",
then wait forever (the test SIGKILLs it). ``... bump PATH N``: CAS-increment PATH N times.
"""

from __future__ import annotations

import asyncio
import sys

from epochlog.metastore import BadVersionError, open_metastore
from epochlog.seams.real import RealClock


async def main(uri: str, mode: str, path: str, arg: str) -> None:
    timeouts = {"hold": 1000, "hold-long": 600_000}
    ms = await open_metastore(uri, RealClock(), session_timeout_ms=timeouts.get(mode, 5000))
    if mode.startswith("hold"):
        await ms.create(path, b"held", ephemeral=True)
        print("ready", flush=True)
        await asyncio.Event().wait()
    for _ in range(int(arg)):
        while True:
            data, stat = await ms.get(path)
            try:
                await ms.set(path, b"%d" % (int(data) + 1), stat.version)
                break
            except BadVersionError:
                continue
    await ms.close()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4], sys.argv[4] if len(sys.argv) > 4 else ""))
