"""``epochlog console``: a web console over the admin API (brokers, partitions with
leader epochs and offsets, groups with lag, observed truncations, a timeline), updated
live. An operations tool outside the broker: it reads the cluster as any client does."""
