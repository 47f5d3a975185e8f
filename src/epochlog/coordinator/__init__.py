"""The group coordinator: consumer groups, committed offsets in ``__consumer_offsets``,
and their KIP-211 expiry. Pure state machines (group, expiry, commits, records) do no
I/O; ``coordinator.py`` and ``store.py`` reach the log through the replica manager."""
