"""What a broker counts as requests are served and how it serves Prometheus text.

The names follow Kafka's metrics as the Prometheus JMX exporter renders them
(``kafka_server_brokertopicmetrics_messagesin_total``...), epochlog's own start with
``epochlog_``. It imports only protocol's error codes, so any layer above may count
into it; the broker's state is read at scrape time by ``broker/metrics.py``."""
