"""``partition.metadata``: the topic id a partition's directory belongs to, in Kafka's
format (``version: 0`` / ``topic_id: <base64url>``), so that the log of a deleted
topic is never taken for the log of a new topic of the same name."""

from __future__ import annotations

import base64
import logging

from epochlog.seams import Disk

PARTITION_METADATA_FILE = "partition.metadata"

logger = logging.getLogger("epochlog.storage")


def topic_id_to_str(raw: bytes) -> str:
    """Kafka's string form of a topic id: base64url of its 16 bytes, no padding."""
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


class PartitionMetadataFile:
    def __init__(self, disk: Disk, directory: str) -> None:
        self.disk = disk
        self.path = f"{directory}/{PARTITION_METADATA_FILE}"

    def read(self) -> str | None:
        """The recorded topic id; None when absent or damaged (logged: the broker
        records it again from the cluster's metadata)."""
        if not self.disk.exists(self.path):
            return None
        try:
            text = self.disk.read_file(self.path).decode()
        except UnicodeDecodeError:
            text = ""
        fields = {}
        for line in text.splitlines():
            if ":" in line:
                key, value = line.split(":", 1)
                fields[key.strip()] = value.strip()
        topic_id = fields.get("topic_id")
        if fields.get("version") != "0" or not topic_id:
            logger.warning("%s is damaged; the topic id will be recorded again", self.path)
            return None
        return topic_id

    def write(self, topic_id: str) -> None:
        self.disk.write_atomic(self.path, f"version: 0\ntopic_id: {topic_id}\n".encode())
