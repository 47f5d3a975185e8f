"""The console in a real headless chromium against a real 3-broker cluster: it shows the
brokers and a partition's leader epoch, follows a forced leader change and an unclean
election without a reload, lists the truncation in the timeline and the quarantine page,
shows a group's committed offset with its epoch and lag, and logs no JavaScript error.
A screenshot of each page is kept (tmp dir and var/console-screenshots/)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from console_browser import (
    chromium,
    console_process,
    open_page,
    rows_of,
    screenshot,
    severe_entries,
    text_of,
    texts_of,
)
from console_browser import wait_for as wait_in
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait
from test_console_http import quarantine_file

from cluster.cluster_harness import eventually, running_cluster
from epochlog.client.fetched import OffsetAndEpoch
from epochlog.client.sync import Admin
from support.broker import BrokerProcess

pytestmark = pytest.mark.long

TOPIC = "console"
FIRST = [(b"first-%d" % i, b"on every replica") for i in range(5)]
LOST = [(b"lost-%d" % i, b"only on the old ISR") for i in range(5)]
NEW = [(b"new-%d" % i, b"on the unclean leader") for i in range(3)]
DIVERGENCE = len(FIRST)
OLD_END = len(FIRST) + len(LOST)
GROUP = "billing"
# As in tests/cluster/test_unclean_election.py: the paused replica stays registered.
SETTINGS = {"zookeeper.session.timeout.ms": "30000"}
ROW = f'tr[data-partition="{TOPIC}-0"]'


def first_row(driver: WebDriver, css: str = f"#topics {ROW}") -> list[str]:
    """The cells of the first row matching ``css`` ([] before it shows): by default the
    partition's row on the topics page."""
    return (rows_of(driver, css) or [[]])[0]


def test_console_follows_elections_and_shows_the_truncation(tmp_path: Path) -> None:
    with (
        running_cluster(tmp_path, f"sqlite://{tmp_path}/metastore.db", **SETTINGS) as cluster,
        console_process(cluster.bootstrap, tmp_path / "console.log") as url,
        chromium() as driver,
    ):
        controller = cluster.controller_id()
        # The controller stays where it is until the unclean election: it serves the
        # lagging replica's ISR shrink at once. The others lead in turn: first, then,
        # after a forced leader change, second (the controller).
        lagging, first = [b for b in range(3) if b != controller]
        second = controller
        cluster.create_topic(
            TOPIC,
            assignment=[[first, second, lagging]],
            unclean_leader_election_enable="true",
            min_insync_replicas="1",
        )
        _, epoch0 = cluster.leader(TOPIC)
        assert cluster.produce(first, TOPIC, FIRST) == (0, 0)
        admin = Admin({"bootstrap.servers": cluster.bootstrap})
        try:
            admin.alter_consumer_group_offsets(GROUP, {(TOPIC, 0): OffsetAndEpoch(3, epoch0)})
        finally:
            admin.close()

        def wait_for(what: str, condition: object, timeout: float = 60) -> object:
            return wait_in(driver, what, condition, timeout)

        driver.get(url)
        driver.execute_script("window.loadedOnce = 'still the first load';")
        wait_for(
            "three brokers",
            lambda d: len(rows_of(d, "#brokers tbody tr")) == 3,
        )
        for b in cluster.brokers:
            row = text_of(driver, f'#brokers tr[data-broker="{b.broker_id}"]')
            assert f"127.0.0.1:{b.port}" in row, row
        assert text_of(driver, "#controller") == str(controller)
        assert text_of(driver, "#metastore") == f"sqlite://{tmp_path}/metastore.db"
        screenshot(driver, tmp_path, "overview")

        open_page(driver, "topics")
        epoch_cell = f"{ROW} td.leader-epoch"
        wait_for(f"leader epoch {epoch0}", lambda d: text_of(d, epoch_cell) == str(epoch0))
        wait_for(
            "the high watermark",
            lambda d: first_row(d)[6:9] == [str(len(FIRST)), "0", str(len(FIRST))],
        )

        open_page(driver, "groups")
        group_row = f'div[data-group="{GROUP}"] {ROW}'
        wait_for(
            "the committed offset with its epoch and lag",
            lambda d: rows_of(d, group_row) == [[f"{TOPIC}-0", "3", str(epoch0), "2"]],
        )
        screenshot(driver, tmp_path, "groups")

        # A forced leader change: the leader is killed, the next ISR member leads.
        open_page(driver, "topics")
        eventually(lambda: cluster.log_end_offset(lagging, TOPIC) == len(FIRST), 30, "replication")
        cluster.kill(first)
        eventually(lambda: cluster.leader(TOPIC)[0] == second, 60, f"broker {second} to lead")
        _, epoch1 = cluster.leader(TOPIC)
        assert epoch1 > epoch0
        wait_for(f"leader epoch {epoch1}", lambda d: text_of(d, epoch_cell) == str(epoch1))
        assert text_of(driver, f"{ROW} td.leader") == str(second)
        cluster.brokers[first].restart()
        eventually(
            lambda: sorted(cluster.metadata(TOPIC)["partitions"][0].isr) == [0, 1, 2],
            60,
            f"broker {first} to rejoin the ISR",
        )

        # The unclean election of tests/cluster/test_unclean_election.py: the lagging
        # replica leaves the ISR paused, the ISR takes more records and dies, the lagging
        # replica is elected without them.
        cluster.pause(lagging)
        eventually(
            lambda: lagging not in cluster.metadata(TOPIC, via=second)["partitions"][0].isr,
            60,
            "the paused replica to leave the ISR",
        )
        assert cluster.produce(second, TOPIC, LOST) == (0, len(FIRST))
        wait_for(
            f"the old ISR's log ends at {OLD_END}",
            lambda d: (
                {f"{first}:{OLD_END}", f"{second}:{OLD_END}"}
                <= set(" ".join(first_row(d)[9:10]).split())
            ),
        )
        cluster.kill(first)
        cluster.kill(second)
        cluster.resume(lagging)
        eventually(
            lambda: cluster.metadata(TOPIC, via=lagging)["partitions"][0].leader == lagging,
            120,
            "the lagging replica to be elected uncleanly",
        )
        epoch2 = cluster.metadata(TOPIC, via=lagging)["partitions"][0].leader_epoch
        assert epoch2 > epoch1
        wait_for(f"leader epoch {epoch2}", lambda d: text_of(d, epoch_cell) == str(epoch2))
        eventually(lambda: cluster.list_offsets(lagging, TOPIC).error == 0, 30, "offsets served")
        assert cluster.produce(lagging, TOPIC, NEW) == (0, DIVERGENCE)
        cluster.brokers[first].restart()
        cluster.brokers[second].restart()
        for b in (first, second):
            eventually(
                lambda b=b: cluster.log_end_offset(b, TOPIC) == DIVERGENCE + len(NEW),
                60,
                f"broker {b} to follow the unclean leader",
            )
            # The brokers kept the cut suffix (read here from their files: the console
            # itself never reads them).
            (kept,) = cluster.quarantined(b, TOPIC)
            assert (kept["first_offset"], kept["last_offset"]) == (DIVERGENCE, OLD_END - 1)
        screenshot(driver, tmp_path, "topics")

        cut = f"{DIVERGENCE}..{OLD_END - 1}"
        open_page(driver, "timeline")
        timeline = f'div.timeline-partition[data-partition="{TOPIC}-0"]'
        wait_for(
            "the unclean election's truncation in the timeline",
            lambda d: any(
                f"offsets {cut}" in text and f"new leader {lagging}" in text
                for text in texts_of(d, f'{timeline} li[data-kind="truncation"]')
            ),
        )
        epochs = text_of(driver, timeline)
        for old, new in ((epoch0, epoch1), (epoch1, epoch2)):
            assert f"leader epoch {old} → {new}" in epochs, epochs
        screenshot(driver, tmp_path, "timeline")

        open_page(driver, "quarantine")
        wait_for(
            "the returning replicas' truncations in the quarantine list",
            lambda d: (
                {row[3] for row in rows_of(d, f"#truncations {ROW}") if row[4] == cut}
                >= {str(lagging), str(first), str(second)}
            ),
        )
        assert driver.find_element(By.ID, "replay-button").get_attribute("disabled") is not None
        screenshot(driver, tmp_path, "quarantine")

        assert driver.execute_script("return window.loadedOnce") == "still the first load"
        assert severe_entries(driver) == []


def test_replay_from_the_page_asks_first_and_writes_only_when_confirmed(
    tmp_path: Path, broker_factory: Callable[..., BrokerProcess]
) -> None:
    broker = broker_factory()
    admin = Admin({"bootstrap.servers": broker.bootstrap})
    try:
        admin.create_topic("replayed", 1, 1)
    finally:
        admin.close()
    kept = tmp_path / "00000000000000000007.log"
    kept.write_bytes(quarantine_file(3))
    row = '#topics tr[data-partition="replayed-0"]'
    with (
        console_process(broker.bootstrap, tmp_path / "console.log", "--allow-actions") as url,
        chromium() as driver,
    ):
        driver.get(url)
        open_page(driver, "topics")
        wait_in(driver, "the empty partition", lambda d: first_row(d, row)[8:9] == ["0"])
        open_page(driver, "quarantine")
        button = driver.find_element(By.ID, "replay-button")
        wait_in(driver, "replay enabled", lambda d: button.is_enabled())
        driver.find_element(By.ID, "replay-file").send_keys(str(kept))
        driver.find_element(By.ID, "replay-topic").send_keys("replayed")
        note = "#replay-note"

        button.click()
        question = WebDriverWait(driver, 30).until(expected_conditions.alert_is_present())
        assert question.text == (
            "Replay 3 records (offsets 7..9, epochs [3]) into replayed-0 as new records?"
        )
        question.dismiss()
        wait_in(driver, "the cancellation", lambda d: text_of(d, note) == "replay cancelled")

        button.click()
        WebDriverWait(driver, 30).until(expected_conditions.alert_is_present()).accept()
        wait_in(
            driver,
            "the replay's result",
            lambda d: text_of(d, note) == "replayed 3 records into replayed-0",
        )
        screenshot(driver, tmp_path, "replay")
        open_page(driver, "topics")
        # Cancelled once, confirmed once: three records, not six.
        wait_in(driver, "the replayed records", lambda d: first_row(d, row)[6:9] == ["3", "0", "3"])
        assert severe_entries(driver) == []
