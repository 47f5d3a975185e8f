"""The truncation story of ``truncation_story.py`` on the shared ``local[2]`` session,
and a batch planned before the election read after it."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

import pytest
from pyspark.sql import SparkSession
from truncation_story import (
    FIRST,
    Story,
    check_fail_stopped,
    check_policy_resumed,
    run_policies,
    told,
)

from epochlog.spark.partition_reader import (
    EpochlogInputPartition,
    PlannedRangeRewrittenError,
    read_partition,
)


@pytest.fixture(scope="module")
def story(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Story]:
    with told(tmp_path_factory.mktemp("truncation"), partial(run_policies, spark)) as s:
        yield s


def test_fail_stops_the_query_naming_the_partition_and_the_lost_range(story: Story) -> None:
    check_fail_stopped(story)


@pytest.mark.parametrize("policy", ["earliest", "latest", "closest"])
def test_policy_reports_the_range_and_reads_the_new_records_once(story: Story, policy: str) -> None:
    check_policy_resumed(story, policy)


@pytest.mark.parametrize("policy", ["fail", "earliest"])
def test_a_batch_planned_before_the_election_and_read_after_it_stops_at_the_rewrite(
    story: Story, policy: str
) -> None:
    """The first run's last plan (offsets up to 10, in the old epoch) read again now:
    the new leader shares offsets 0..4 and rewrote 5..; the task yields 3..4 and stops
    (fail: raises naming the range) instead of handing out the new records as planned."""
    topic = story.topics[policy]
    planned_end = story.first_run[policy][-1]["topics"][topic]["partitions"]["0"]
    assert planned_end["offset"] == 10
    part = EpochlogInputPartition(
        topic,
        0,
        3,
        0,
        10,
        {"bootstrap.servers": story.bootstrap},
        False,
        30000,
        policy,
        planned_end["epoch"],
    )
    rows: list[bytes] = []
    reader = read_partition(part)
    if policy == "fail":
        with pytest.raises(PlannedRangeRewrittenError, match="offsets 5..9"):
            for batch in reader:
                rows += batch.column(batch.schema.get_field_index("value")).to_pylist()
    else:
        for batch in reader:
            rows += batch.column(batch.schema.get_field_index("value")).to_pylist()
    assert rows == FIRST[3:]
