"""Storage: segments of record batches, indexes, leader-epoch cache, producer state,
checkpoints, and the manager of every partition's log (DESIGN §2). Knows nothing above it.
"""
