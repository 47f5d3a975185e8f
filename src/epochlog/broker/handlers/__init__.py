"""One module per Kafka API; each exposes ``async handle(broker, request, version, frame)``
returning a response message, a RawResponse, or None when no answer is due."""

from __future__ import annotations

from epochlog.broker.handlers import (
    api_versions,
    create_partitions,
    create_topics,
    delete_topics,
    describe_configs,
    fetch,
    init_producer_id,
    list_offsets,
    metadata,
    offset_for_leader_epoch,
    produce,
)
from epochlog.protocol.apis import ApiKey

HANDLERS = {
    ApiKey.PRODUCE: produce.handle,
    ApiKey.FETCH: fetch.handle,
    ApiKey.LIST_OFFSETS: list_offsets.handle,
    ApiKey.METADATA: metadata.handle,
    ApiKey.API_VERSIONS: api_versions.handle,
    ApiKey.CREATE_TOPICS: create_topics.handle,
    ApiKey.DELETE_TOPICS: delete_topics.handle,
    ApiKey.INIT_PRODUCER_ID: init_producer_id.handle,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: offset_for_leader_epoch.handle,
    ApiKey.DESCRIBE_CONFIGS: describe_configs.handle,
    ApiKey.CREATE_PARTITIONS: create_partitions.handle,
}
