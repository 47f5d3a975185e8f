"""Storage: segments of record batches, indexes, leader-epoch cache, producer state,
checkpoints, and the manager of every partition's log. Knows nothing above it.
"""
