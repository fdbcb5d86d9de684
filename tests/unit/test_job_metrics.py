"""The metric points a job's watch makes (tfk8s_airflow.job.run.jobmetrics), each once, and the emitter's
refusal of a name outside the catalogue. What a StatsD server receives from real runs:
tests/airflow/test_metrics_statsd.py."""
from __future__ import annotations

import pytest

from tfk8s_airflow.job.run.jobmetrics import JobMetrics, steps_per_second
from tfk8s_airflow.job.run.judge import JobStatus, ReplicaState
from tfk8s_airflow.job.run.records import Attempt, JobProgress, JobRecord, ProgressPoint, ReplicaRef
from tfk8s_airflow.job.states import JobState
from tfk8s_airflow.metricnames import BY_NAME, CATALOG, Point


def _record(queue=None):
    return JobRecord(job="j", namespace="ns", service="j", configmap="j-shards", selector="tfk8s.io/job=j",
                     policy={}, replicas=(ReplicaRef("worker-0", "worker", 0, "j-worker-0", True),), created_at=100.0,
                     identity={"tfk8s.io/dag": "daily"}, queue=queue)


def _status(state, *phases):
    reps = {f"worker-{i}": ReplicaState("worker", i, f"j-worker-{i}", ph) for i, ph in enumerate(phases)}
    return JobStatus(state, replicas=reps)


def test_admission_running_and_each_attempt_are_each_reported_once():
    m = JobMetrics(_record(queue="team-a"), dag="d", task="train.wait")
    assert m.on_status(_status(JobState.QUEUED, "Pending", "Pending"), (), 110.0) == []
    first = m.on_status(_status(JobState.RUNNING, "Running", "Pending"), (), 130.0)
    assert [(p.name, p.value) for p in first] == [("tfk8s.job.admission_wait", 30.0)]
    assert dict(first[0].tags) == {"dag": "d", "task": "train.wait", "job": "j", "queue": "team-a"}
    attempts = (Attempt(2, "infrastructure", "preempted", 140.0, "replace", ("worker-1",)),)
    second = m.on_status(_status(JobState.RUNNING, "Running", "Succeeded"), attempts, 145.0)
    assert [(p.name, p.value) for p in second] == [("tfk8s.job.time_to_running", 45.0), ("tfk8s.job.restarts", 1)]
    assert ("class", "infrastructure") in second[1].tags and ("action", "replace") in second[1].tags
    assert m.on_status(_status(JobState.RUNNING, "Running", "Running"), attempts, 150.0) == []


def test_the_verdict_reports_duration_outcome_exits_and_rates():
    m = JobMetrics(_record())
    progress = JobProgress(job="j", namespace="ns", state=JobState.SUCCEEDED, updated_at=0.0, examples_per_sec=512.0,
                           history=(ProgressPoint(100.0, 10), ProgressPoint(110.0, 60)))
    points = m.at_end(_status(JobState.SUCCEEDED, "Succeeded", "Running"), "succeeded", None, progress, 160.0)
    by = {p.name: p for p in points}
    assert by["tfk8s.job.duration"].value == 60.0 and ("class", "none") in by["tfk8s.job.duration"].tags
    assert ("outcome", "succeeded") in by["tfk8s.job.outcome"].tags
    assert [p.name for p in points].count("tfk8s.replica.exits") == 1  # worker-1 still ran
    assert by["tfk8s.job.steps_per_second"].value == 5.0 and by["tfk8s.job.examples_per_second"].value == 512.0
    assert dict(by["tfk8s.job.outcome"].tags)["dag"] == "daily"  # no task instance: the job's DAG label
    assert all(p.name in BY_NAME for p in points)


def test_steps_per_second_needs_two_points_apart():
    assert steps_per_second(()) is None and steps_per_second((ProgressPoint(1.0, 5),)) is None
    assert steps_per_second((ProgressPoint(1.0, 5), ProgressPoint(1.0, 9))) is None


def test_the_catalogue_names_are_unique_and_prefixed_and_emit_refuses_others():
    from tfk8s_airflow import metrics

    assert len(BY_NAME) == len(CATALOG) and all(m.name.startswith("tfk8s.") for m in CATALOG)
    with pytest.raises(ValueError, match="not in tfk8s_airflow.metricnames.CATALOG"):
        metrics.emit([Point("tfk8s.made_up", 1)])
