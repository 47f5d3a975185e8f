"""epochlog: a Kafka-compatible, replicated, partitioned commit log whose readers never
lose or re-read data silently when leadership changes (KIP-320, KIP-207, KIP-232,
KIP-211), with a PySpark connector (``pyspark_epochlog``). ARCHITECTURE.md maps the parts."""
