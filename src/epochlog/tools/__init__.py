"""What the command line and the demo both run: a local cluster of broker processes,
and the reading and replaying of quarantined records."""
