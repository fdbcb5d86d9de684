"""The deployment bounds what a spec (or the form) may ask of scheduling (issue 37): how long setup's
pre-flight may wait while it holds a worker slot (`[tfk8s] max_schedule_timeout`), and which Kueue queues
and priority classes it may name (`allowed_queues`, `allowed_priority_classes`). Each refusal names the
spec's field and the setting; the defaults keep what was admitted before."""
import pytest

from tfk8s_airflow.exceptions import SpecError
from tfk8s_airflow.job.policy import DeploymentPolicy
from tfk8s_airflow.job.spec import parse_spec

MINIMAL = {"name": "job", "image": "tfk8s/trainer:0.1", "worker": 1}


def refusals(doc, policy):
    with pytest.raises(SpecError) as info:
        parse_spec({**MINIMAL, **doc}, policy=policy)
    return {p.field: str(p) for p in info.value.problems}


def test_a_schedule_timeout_beyond_the_deployments_maximum_is_refused_before_anything_is_created():
    policy = DeploymentPolicy()
    assert policy.max_schedule_timeout == 24 * 3600
    got = refusals({"schedule_timeout": 68 * 365 * 86400}, policy)
    assert set(got) == {"schedule_timeout"}
    assert "86400s" in got["schedule_timeout"] and "[tfk8s] max_schedule_timeout" in got["schedule_timeout"]
    assert parse_spec({**MINIMAL, "schedule_timeout": "24h"}, policy=policy).schedule_timeout == 86400
    assert parse_spec(MINIMAL, policy=policy).schedule_timeout == 300  # the default is well within
    wider = DeploymentPolicy.from_env({"TFK8S_MAX_SCHEDULE_TIMEOUT": "3d"})
    assert parse_spec({**MINIMAL, "schedule_timeout": "48h"}, policy=wider).schedule_timeout == 48 * 3600
    assert set(refusals({"schedule_timeout": "2h"}, DeploymentPolicy.from_env(
        {"TFK8S_MAX_SCHEDULE_TIMEOUT": "1h"}))) == {"schedule_timeout"}


def test_a_bad_max_schedule_timeout_setting_names_the_setting():
    with pytest.raises(SpecError, match=r"\[tfk8s\] max_schedule_timeout"):
        DeploymentPolicy.from_env({"TFK8S_MAX_SCHEDULE_TIMEOUT": "forever"})


def test_a_queue_outside_the_allowed_ones_is_refused_naming_field_and_setting():
    assert parse_spec({**MINIMAL, "queue": "anything"}, policy=DeploymentPolicy()).queue == "anything"  # default *
    policy = DeploymentPolicy.from_env({"TFK8S_ALLOWED_QUEUES": "team-a, team-b",
                                        "TFK8S_DEFAULT_QUEUE": "shared"})
    got = refusals({"queue": "vip"}, policy)
    assert set(got) == {"queue"} and "[tfk8s] allowed_queues" in got["queue"] and "team-a, team-b" in got["queue"]
    assert parse_spec({**MINIMAL, "queue": "team-b"}, policy=policy).queue == "team-b"
    assert parse_spec({**MINIMAL, "queue": "shared"}, policy=policy).queue == "shared"  # the default queue
    assert parse_spec(MINIMAL, policy=policy).queue is None


def test_a_priority_class_outside_the_allowed_ones_is_refused_wherever_the_spec_names_it():
    doc = {"queue": "q", "priority_class": "high"}
    assert parse_spec({**MINIMAL, **doc}, policy=DeploymentPolicy()).priority_class == "high"  # default *
    policy = DeploymentPolicy.from_env({"TFK8S_ALLOWED_PRIORITY_CLASSES": "low,normal"})
    got = refusals(doc, policy)
    assert set(got) == {"priority_class"} and "[tfk8s] allowed_priority_classes" in got["priority_class"]
    assert parse_spec({**MINIMAL, "queue": "q", "priority_class": "normal"}, policy=policy).priority_class == "normal"
    tpl = {"pod_template": {"spec": {"priorityClassName": "system-cluster-critical"}}}
    got = refusals(tpl, policy)
    assert set(got) == {"pod_template.spec.priorityClassName"}, got
    got = refusals({"worker": {"replicas": 1, **tpl}}, policy)
    assert set(got) == {"worker.pod_template.spec.priorityClassName"}, got
