"""The resource types of DescribeConfigs, AlterConfigs and IncrementalAlterConfigs
(Kafka's ConfigResource.Type), for the broker's handlers and the admin client alike."""

from __future__ import annotations

from enum import IntEnum


class ConfigResource(IntEnum):
    TOPIC = 2
    BROKER = 4
