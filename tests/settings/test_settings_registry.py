"""One settings registry per component: every setting declared once, refused the same
way wherever it is given, and the reference in docs/ written from it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from epochlog.broker.config import BrokerConfig
from epochlog.cli.main import main
from epochlog.client import Consumer, Producer
from epochlog.client.config import CONSUMER, PRODUCER
from epochlog.settings.broker import BROKER
from epochlog.settings.registry import SettingError
from epochlog.settings.topic import TOPIC
from epochlog.storage.config import LogConfig
from epochlog.tools.settings_reference import reference
from support.kafka_configs import KAFKA_TOPIC_CONFIGS

ROOT = Path(__file__).resolve().parents[2]

UNKNOWN = "no.such.setting: unknown setting"
BAD_BROKER_VALUE = "replica.lag.time.max.ms: expected an integer, got 'soon'"


def test_docs_settings_reference_is_generated_from_the_registries() -> None:
    written = (ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
    assert written == reference(), "run `epochlog settings > docs/settings.md`"
    for registry in (BROKER, TOPIC, PRODUCER, CONSUMER):
        for setting in registry:
            assert f"| `{setting.name}` |" in written


def test_every_setting_has_documentation_and_a_default_its_kind_accepts() -> None:
    for registry in (BROKER, TOPIC, PRODUCER, CONSUMER):
        for setting in registry:
            assert setting.doc.strip(), setting.name
            if setting.default is not None:
                setting.kind.parse(setting.name, setting.default)


def test_every_setting_the_code_reads_is_declared() -> None:
    client = {s.name for registry in (PRODUCER, CONSUMER) for s in registry}
    client |= {"compression.codec"}  # derived by producer_config from compression.type
    undeclared = []
    scanned = 0
    for path in (ROOT / "src" / "epochlog").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        read = set(re.findall(r'config\["([a-z0-9.]+)"\]', text))
        read |= set(re.findall(r'bound\(\s*BROKER,\s*"([a-z0-9.]+)"', text))
        scanned += len(read)
        side = "client" if {"client", "spark"} & set(path.parts) else "broker"
        known = client if side == "client" else {s.name for s in BROKER}
        undeclared += [f"{path.name}: {name}" for name in sorted(read - known)]
    assert scanned > 50, "the scan found too little: the patterns are out of date"
    assert undeclared == []


def test_a_broker_refuses_a_bad_value_with_the_same_message_from_every_source(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    given, message = {"replica.lag.time.max.ms": "soon"}, BAD_BROKER_VALUE
    with pytest.raises(SettingError) as raised:
        BrokerConfig.from_mapping({"log.dirs": str(tmp_path), **given})
    assert str(raised.value) == message

    ((name, value),) = given.items()
    assert main(["broker", "--log-dirs", str(tmp_path), "--set", f"{name}={value}"]) == 2
    assert capsys.readouterr().err.strip() == f"epochlog broker: {message}"

    properties = tmp_path / "server.properties"
    properties.write_text(f"log.dirs={tmp_path}\n{name}={value}\n", encoding="utf-8")
    assert main(["broker", "--config", str(properties)]) == 2
    assert capsys.readouterr().err.strip() == f"epochlog broker: {message}"

    assert main(["up", "--data-dir", str(tmp_path / "up"), "--set", f"{name}={value}"]) == 2
    assert capsys.readouterr().err.strip() == f"epochlog up: {message}"
    assert not (tmp_path / "up").exists(), "no broker was started"


def test_a_broker_sets_unknown_settings_aside_for_its_startup_warning(tmp_path: Path) -> None:
    config = BrokerConfig.from_mapping(
        {"log.dirs": str(tmp_path), "log.retention.hourz": "1", "no.such.setting": "1"}
    )
    assert config.unknown == ("log.retention.hourz", "no.such.setting")
    assert "log.retention.hourz" not in config.settings.given


def test_a_broker_started_with_a_misspelt_setting_warns_naming_it(broker_factory) -> None:
    broker = broker_factory({"log.retention.hourz": "1", "log.retention.hours": "2"})
    warnings = [line for line in broker.output().splitlines() if "isn't a known config" in line]
    assert len(warnings) == 1 and "'log.retention.hourz'" in warnings[0], broker.tail()
    assert "warn" in warnings[0].lower()


def test_topic_and_client_settings_are_refused_with_the_same_message() -> None:
    with pytest.raises(SettingError, match=f"^{UNKNOWN}$"):
        LogConfig.from_properties({"no.such.setting": "1"})
    with pytest.raises(SettingError, match=r"^retention\.ms: expected an integer, got 'soon'$"):
        LogConfig.from_properties({"retention.ms": "soon"})
    client = {"bootstrap.servers": "127.0.0.1:9", "no.such.setting": 1}
    for make in (Producer, Consumer):
        with pytest.raises(SettingError, match=f"^{UNKNOWN}$"):
            make(client)
    with pytest.raises(SettingError, match=r"^linger\.ms: expected an integer, got 'soon'$"):
        Producer({"bootstrap.servers": "127.0.0.1:9", "linger.ms": "soon"})


def test_bound_components_take_their_defaults_and_values_from_the_registry(
    tmp_path: Path,
) -> None:
    from epochlog.coordinator.settings import CoordinatorSettings
    from epochlog.txn.settings import TransactionSettings

    assert (
        CoordinatorSettings().retention_ms == BROKER.default("offsets.retention.minutes") * 60_000
    )
    config = BrokerConfig.from_mapping(
        {
            "log.dirs": str(tmp_path),
            "offsets.retention.minutes": "2",
            "transaction.max.timeout.ms": "1000",
            "log.retention.hours": "1",
        }
    )
    assert CoordinatorSettings.from_settings(config.settings).retention_ms == 120_000
    assert TransactionSettings.from_settings(config.settings).max_timeout_ms == 1000
    assert config["log.retention.hours"] == 1
    assert config.settings.given == {
        "log.dirs",
        "offsets.retention.minutes",
        "transaction.max.timeout.ms",
        "log.retention.hours",
    }


def test_every_kafka_topic_config_is_known_with_kafkas_default() -> None:
    assert {s.name for s in TOPIC} == set(KAFKA_TOPIC_CONFIGS)
    assert LogConfig().to_properties() == KAFKA_TOPIC_CONFIGS


def test_a_topic_config_without_meaning_here_is_accepted_and_marked_so() -> None:
    from epochlog.settings.topic import NO_EFFECT

    inert = {s.name for s in TOPIC if s.section == NO_EFFECT}
    assert "preallocate" in inert and "compression.type" not in inert
    for name in inert:
        assert TOPIC[name].doc.startswith(NO_EFFECT), name
    config = LogConfig.from_properties({"preallocate": "true", "segment.jitter.ms": "5"})
    assert config.to_properties()["preallocate"] == "true"
    with pytest.raises(SettingError, match="^remote.storage.enable: tiered storage"):
        LogConfig.from_properties({"remote.storage.enable": "true"})
    # Values are checked as Kafka checks them, though they change nothing here.
    throttled = "leader.replication.throttled.replicas"
    for value in ("*", "0:1, 1:2", ""):
        LogConfig.from_properties({throttled: value})
    with pytest.raises(SettingError, match=f"^{throttled}: 'broker1'"):
        LogConfig.from_properties({throttled: "broker1"})


def test_every_honoured_topic_config_is_read_by_the_code() -> None:
    from epochlog.settings.topic import NO_EFFECT

    source = "".join(p.read_text(encoding="utf-8") for p in (ROOT / "src").rglob("*.py"))
    # Once declared as a LogConfig field, and read at least once more.
    unread = [
        s.name
        for s in TOPIC
        if s.section != NO_EFFECT and source.count(s.name.replace(".", "_")) < 2
    ]
    assert unread == []
