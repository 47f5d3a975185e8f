import pytest

from epochlog.settings.broker import BROKER
from epochlog.settings.registry import LONG_MAX
from epochlog.storage.config import LogConfig, topic_defaults_from_broker


def test_defaults_follow_kafka():
    c = LogConfig()
    assert c.segment_bytes == 1 << 30
    assert c.retention_ms == 7 * 24 * 3600 * 1000
    assert c.retention_bytes == -1
    assert c.index_interval_bytes == 4096
    assert c.flush_messages == LONG_MAX
    assert c.max_message_bytes == 1048588
    assert c.message_timestamp_type == "CreateTime"
    assert c.cleanup_policy == "delete"
    assert c.unclean_leader_election_enable is False
    assert c.min_insync_replicas == 1


def test_topic_properties_parse_and_round_trip():
    c = LogConfig.from_properties(
        {
            "segment.bytes": "1024",
            "retention.ms": "-1",
            "message.timestamp.type": "LogAppendTime",
            "unclean.leader.election.enable": "true",
        }
    )
    assert (c.segment_bytes, c.retention_ms, c.log_append_time) == (1024, -1, True)
    assert c.unclean_leader_election_enable
    assert LogConfig.from_properties(c.to_properties()) == c


@pytest.mark.parametrize(
    "props, name",
    [
        ({"segment.bytes": "big"}, "segment.bytes"),
        ({"retention.ms": "-5"}, "retention.ms"),
        ({"message.timestamp.type": "Wall"}, "message.timestamp.type"),
        ({"no.such.setting": "1"}, "no.such.setting"),
        ({"unclean.leader.election.enable": "yes"}, "unclean.leader.election.enable"),
    ],
)
def test_bad_topic_settings_raise_naming_the_setting(props, name):
    with pytest.raises(ValueError, match=name.replace(".", r"\.")):
        LogConfig.from_properties(props)


def test_broker_log_settings_map_to_topic_defaults_with_ms_over_minutes_over_hours():
    c = topic_defaults_from_broker(
        BROKER.parse(
            {
                "log.retention.hours": "1",
                "log.retention.minutes": "2",
                "log.roll.hours": "3",
                "log.segment.bytes": "4096",
                "message.max.bytes": "2000",
                "log.flush.interval.messages": "7",
                "log.message.timestamp.type": "LogAppendTime",
                "broker.id": "1",
            }
        )
    )
    assert c.retention_ms == 120_000
    assert c.segment_ms == 3 * 3_600_000
    assert c.segment_bytes == 4096
    assert c.max_message_bytes == 2000
    assert c.flush_messages == 7
    assert c.log_append_time
    assert (
        topic_defaults_from_broker(
            BROKER.parse({"log.retention.ms": "5", "log.retention.hours": "9"})
        ).retention_ms
        == 5
    )
    assert (
        topic_defaults_from_broker(BROKER.parse({"log.retention.hours": "-1"})).retention_ms == -1
    )


def test_malformed_broker_setting_names_the_broker_setting():
    with pytest.raises(ValueError, match=r"log\.retention\.hours"):
        topic_defaults_from_broker(BROKER.parse({"log.retention.hours": "soon"}))
    with pytest.raises(ValueError, match=r"log\.segment\.bytes"):
        topic_defaults_from_broker(BROKER.parse({"log.segment.bytes": "x"}))
