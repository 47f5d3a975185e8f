"""The broker: network server, request handlers, and the wiring between parts."""
