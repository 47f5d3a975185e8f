"""The Kafka wire protocol, apart from the broker: errors, framing, the API registry
and the record-batch codec. Nothing here does I/O."""
