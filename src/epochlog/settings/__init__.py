"""Settings declared once: the registry types (registry.py), the broker's settings
(broker.py), the topic settings (topic.py) and the generated reference (reference.py).
The client's live in epochlog.client.config, on the same types."""
