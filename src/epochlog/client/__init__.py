"""epochlog's own Kafka client (grows into producer, consumer and admin)."""
