"""The pure rules behind "every replica task ends with its job" (tests/e2e/test_replica_tasks_end.py
runs the whole lifecycle on the real stack; tests/airflow/test_watch_lifecycle.py the shared watch
against a real API server).

* A job's verdict as kept on its Service: what is written is read back; anything else a namespace
  writer could put there is refused, never a traceback.
* Which replica tasks teardown still waits for, from the task states Airflow reports.
* A log follower that does not stop when cancelled cannot hold its replica's task: ``close`` is bounded.
  (The stand-in is a coroutine that ignores cancellation, as one that lost its cancellation to
  Python 3.11's ``asyncio.wait_for`` did; a real stream cannot be made to do that on demand.)
"""
from __future__ import annotations

import asyncio
import json
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tfk8s_airflow.job.builders.objects import JobNames, plan_replicas
from tfk8s_airflow.job.run.judge import JobPolicy
from tfk8s_airflow.job.run.resolve import job_record
from tfk8s_airflow.job.run.verdict import (
    VERDICT_ANNOTATION,
    VERDICT_REASON_MAX,
    read_verdict,
    summary_verdict,
    verdict_body,
)
from tfk8s_airflow.job.spec import parse_spec
from tfk8s_airflow.k8s import logstream
from tfk8s_airflow.k8s.logstream import LogFollower
from tfk8s_airflow.operators.teardown import replicas_not_ended
from tfk8s_airflow.triggers.job import setup_task_id, sibling_task_id


def annotations(body: dict) -> dict:
    return body["metadata"]["annotations"]


def test_a_verdict_written_is_read_back_with_its_reason_bounded():
    body = verdict_body("succeeded", "success policy met: worker-0 succeeded" + "!" * 5000, "watch")
    got = read_verdict(annotations(body))
    assert got is not None and got["state"] == "succeeded" and got["by"] == "watch"
    assert got["reason"].startswith("success policy met") and len(got["reason"]) == VERDICT_REASON_MAX


@pytest.mark.parametrize("raw", [None, "", "{", "[]", "null", '{"state": "running"}', '{"state": 1}',
                                 '{"reason": "x"}', json.dumps({"state": "succeeded", "reason": "x" * 10_000})])
def test_anything_but_a_verdict_is_no_verdict(raw):
    assert read_verdict({} if raw is None else {VERDICT_ANNOTATION: raw}) is None


@given(st.one_of(st.text(max_size=300), st.binary(max_size=100), st.integers(), st.none(),
                 st.dictionaries(st.text(max_size=10), st.text(max_size=10), max_size=4).map(json.dumps)))
def test_a_hostile_verdict_annotation_never_raises(raw):
    got = read_verdict({VERDICT_ANNOTATION: raw})
    assert got is None or got["state"] in ("succeeded", "failed", "ended")


def test_teardown_waits_only_for_the_replica_tasks_that_have_not_ended():
    spec = parse_spec({"name": "w", "image": "i:1", "ps": 1, "worker": 2})
    names = JobNames.for_run(spec, "manual__1", "train", "dag")
    record = job_record(spec, names, plan_replicas(spec, names), policy=JobPolicy.from_spec(spec), has_shards=False,
                        kubernetes_conn_id="kubernetes_default", poll_interval=1.0)
    keys = [r.key for r in record.replicas]
    states = {"train.replica_0": "deferred", "train.replica_1": "success", "train.replica_2": None,
              "train.wait": "success", "train.replica_x": "running", "other.replica_0": "running"}
    assert replicas_not_ended(states, "train.replica", record) == sorted([keys[0], keys[2]])
    assert replicas_not_ended({f"train.replica_{i}": "failed" for i in range(3)}, "train.replica", record) == []


def test_the_tasks_of_a_group_are_found_by_their_names():
    assert sibling_task_id("train.replica", "wait") == "train.wait"
    assert sibling_task_id("outer.train.teardown", "replica") == "outer.train.replica"
    assert sibling_task_id("replica", "wait") == "wait" and setup_task_id("train.replica") == "train.setup"


def test_close_of_a_follower_that_ignores_its_cancellation_returns_within_its_bound(monkeypatch, tmp_path):
    monkeypatch.setattr(logstream, "CLOSE_TIMEOUT_S", 0.5)

    released = False

    async def stubborn() -> None:
        while not released:
            try:
                await asyncio.sleep(0.05)
            except asyncio.CancelledError:
                continue  # as a follower whose cancellation was lost

    async def scenario() -> float:
        nonlocal released
        follower = LogFollower(open_api=lambda: None, namespace="ns", pod="p", container="c",
                               log_dir=str(tmp_path), job="j")
        task = follower._task = asyncio.ensure_future(stubborn())
        t0 = time.monotonic()
        await follower.close(0.2)
        took = time.monotonic() - t0
        assert not task.done()  # left behind, not waited for
        released = True
        await task
        return took

    took = asyncio.run(asyncio.wait_for(scenario(), 10))
    assert took < 5, took


def test_the_sensors_summary_gives_the_verdict_as_a_dict_or_as_its_json_text():
    summary = {"state": "succeeded", "reason": "success policy met", "replicas": {"ps-0": {"phase": "Running"}}}
    assert summary_verdict(summary) == ("succeeded", "success policy met", {"ps-0": {"phase": "Running"}})
    assert summary_verdict(json.dumps(summary)) == summary_verdict(summary)  # as the triggerer's XCom has it
    for junk in (None, "", "{", "[]", {"state": "running"}, {"state": "failed", "replicas": [1]}, 7):
        got = summary_verdict(junk)
        assert got is None or got == ("failed", "", {}), junk
