"""Client quotas (KIP-13, KIP-55, KIP-124, KIP-219, KIP-546): byte rates for producers
and consumers and a share of the broker's request handling time, per user, per client
id, or per (user, client id), with defaults, as Kafka's.

    entities.py      quota entities and keys, their validation and the DescribeClientQuotas
                     filter, with Kafka's errors; pure
    rate.py          Kafka's windowed rate (SampledStat, Rate) and throttle time; pure
    manager.py       one quota type's limits by entity and each client's measured rate
                     (Kafka's ClientQuotaManager and DefaultQuotaCallback); pure
    store.py         quotas in the metastore (Kafka's /config/users and /config/clients
                     layout), followed by every broker into its managers
    accounting.py    one request's share: what it is charged, its throttle time, and the
                     event-loop time spent on it (the request quota's measure)
"""
