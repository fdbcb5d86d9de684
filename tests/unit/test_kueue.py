"""Kueue's pod groups as the job makes them, and a Workload's conditions as the watch reads them.

The Workloads are shaped as Kueue v0.19.2 writes them (apis/kueue/v1beta2; messages from its
flavorassigner and workload controller); the devstack tests (tests/kueue) check them against a
real Kueue.
"""
from __future__ import annotations

import pytest

from tfk8s_airflow.exceptions import SpecError
from tfk8s_airflow.job import kueue
from tfk8s_airflow.job.policy import DeploymentPolicy
from tfk8s_airflow.job.spec import parse_spec
from tfk8s_airflow.job.spec.tfjob import to_native


def pod(name: str = "j-worker-0", labels=None, gates=("tfk8s.io/gang",)) -> dict:
    return {"metadata": {"name": name, "namespace": "ns", "labels": dict(labels or {})},
            "spec": {"schedulingGates": [{"name": g} for g in gates]}}


def test_the_pods_join_one_group_of_the_job_size():
    member = kueue.in_group(pod(labels={"tfk8s.io/job": "j"}), "team-a", "j", 3, "high")
    assert member["metadata"]["labels"] == {"tfk8s.io/job": "j", kueue.QUEUE_LABEL: "team-a",
                                            kueue.GROUP_LABEL: "j", kueue.PRIORITY_LABEL: "high"}
    assert member["metadata"]["annotations"] == {kueue.GROUP_TOTAL_ANNOTATION: "3"}
    assert kueue.PRIORITY_LABEL not in kueue.in_group(pod(), "q", "j", 1)["metadata"]["labels"]


def test_each_attempt_is_a_new_group_and_new_pod_names_of_valid_length():
    assert kueue.group_name("j") == "j" and kueue.group_name("j", 2) == "j-a2"
    long_job = "x" * 63
    names = {kueue.group_name(long_job, n) for n in (1, 2, 3)}
    assert len(names) == 3 and all(len(n) <= 63 for n in names)
    assert kueue.attempt_pod_name("j-worker-0", 1) == "j-worker-0"
    assert kueue.attempt_pod_name("j-worker-0", 2) == "j-worker-0-a2"


def test_a_pod_kueue_did_not_label_and_gate_is_unmanaged():
    managed = pod(labels={kueue.MANAGED_LABEL: "true"}, gates=("tfk8s.io/gang", kueue.ADMISSION_GATE))
    assert kueue.unmanaged_reason(managed, "q") is None
    why = kueue.unmanaged_reason(pod(), "q")
    assert why is not None and "does not manage namespace ns" in why and kueue.ADMISSION_GATE in why


def wl(*conditions, created="2026-01-01T10:00:00Z") -> dict:
    return {"metadata": {"name": "j", "creationTimestamp": created},
            "status": {"conditions": [{"type": t, "status": s, "reason": r, "message": m}
                                      for t, s, r, m in conditions]}}


def test_a_pending_workload_is_queued_with_kueues_message_and_position():
    w = wl(("QuotaReserved", "False", "Pending",
            "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor f, "
            "4 more needed"))
    a = kueue.read_workload(w, "j", "test")
    assert a.state == kueue.QUEUED and not a.never
    pending = {"items": [{"metadata": {"name": "other"}, "positionInLocalQueue": 0},
                         {"metadata": {"name": "j"}, "positionInLocalQueue": 1}]}
    line = kueue.Admission(**{**a.__dict__, "position": kueue.position_in(pending, "j")}).describe()
    assert line == ("queued in test, position 2, since 10:00:00Z: couldn't assign flavors to pod set main: "
                    "insufficient unused quota for nvidia.com/gpu in flavor f, 4 more needed")


@pytest.mark.parametrize("reason,message", [
    ("Pending", "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor f, "
                "previously considered podsets requests (0) + current podset request (8) > maximum capacity (4)"),
    ("Inadmissible", "LocalQueue nope doesn't exist"),
    ("Misconfigured", "LocalQueue nope doesn't exist"),
    ("ExceedsMaxQuota", "insufficient quota"),
])
def test_a_workload_that_can_never_fit_or_has_no_queue_is_never(reason, message):
    a = kueue.read_workload(wl(("QuotaReserved", "False", reason, message)), "j", "test")
    assert a.never and a.message == message and a.describe().startswith("never admitted in test: ")


def test_admitted_evicted_and_missing():
    assert kueue.read_workload(wl(("QuotaReserved", "True", "QuotaReserved", ""), ("Admitted", "True", "Admitted", "")),
                               "j", "q").state == kueue.ADMITTED
    ev = kueue.read_workload(wl(("Admitted", "True", "Admitted", ""),
                                ("Evicted", "True", "Preempted", "Preempted to accommodate a workload")), "j", "q")
    assert ev.state == kueue.EVICTED and ev.reason == kueue.PREEMPTED_REASON
    assert kueue.read_workload(None, "j", "q").state == kueue.MISSING


def test_queue_and_priority_class_in_the_spec():
    base = {"name": "a", "image": "x", "worker": 2}
    spec = parse_spec({**base, "queue": "team-a", "priority_class": "high"})
    assert (spec.queue, spec.priority_class) == ("team-a", "high")
    assert parse_spec(base).queue is None
    with pytest.raises(SpecError) as exc:
        parse_spec({**base, "priority_class": "high"})
    assert exc.value.fields == ("priority_class",)
    with pytest.raises(SpecError) as exc:
        parse_spec({**base, "queue": "Team_A"})
    assert exc.value.fields == ("queue",)


def test_kueue_labels_written_by_hand_are_refused_naming_queue():
    with pytest.raises(SpecError) as exc:
        parse_spec({"name": "a", "image": "x", "worker": 2, "labels": {kueue.QUEUE_LABEL: "q"}})
    assert "write queue:" in str(exc.value)
    with pytest.raises(SpecError) as exc:
        parse_spec({"name": "a", "image": "x", "worker": 2,
                             "pod_template": {"metadata": {"labels": {kueue.GROUP_LABEL: "g"}}}})
    assert "write queue:" in str(exc.value)


def test_kueue_labels_written_as_annotations_are_refused_naming_the_field():
    """Kueue 0.19 reads the queue from the label only; older releases read the annotation too, which would make
    each pod a Workload of its own and bypass ``allowed_queues``."""
    for where, doc in (("annotations", {"annotations": {kueue.QUEUE_LABEL: "other-team"}}),
                       ("worker.annotations", {"worker": {"replicas": 2,
                                                          "annotations": {kueue.PRIORITY_LABEL: "high"}}}),
                       ("pod_template.metadata.annotations",
                        {"pod_template": {"metadata": {"annotations": {kueue.QUEUE_LABEL.upper(): "q"}}}})):
        with pytest.raises(SpecError) as exc:
            parse_spec({"name": "a", "image": "x", "worker": 2, **doc})
        assert any(f.startswith(where) for f in exc.value.fields), (where, exc.value.fields)
        assert "write queue:" in str(exc.value)
    assert parse_spec({"name": "a", "image": "x", "worker": 2,
                       "annotations": {"kueue.x-k8s.io/retriable-in-group": "false"}}).annotations


def test_a_tfjobs_kueue_labels_become_queue_and_priority_class():
    tfjob = {"apiVersion": "kubeflow.org/v1", "kind": "TFJob",
             "metadata": {"name": "mnist", "labels": {kueue.QUEUE_LABEL: "team-a", kueue.PRIORITY_LABEL: "high",
                                                      "team": "x"}},
             "spec": {"tfReplicaSpecs": {"Worker": {"replicas": 2, "template": {"spec": {"containers": [
                 {"name": "tensorflow", "image": "tf:2"}]}}}}}}
    native = to_native(tfjob).spec
    assert native["queue"] == "team-a" and native["priority_class"] == "high" and native["labels"] == {"team": "x"}
    assert parse_spec(tfjob).queue == "team-a"


def test_the_deployment_default_queue():
    assert DeploymentPolicy.from_env({"TFK8S_DEFAULT_QUEUE": "shared"}).default_queue == "shared"
    assert DeploymentPolicy.from_env({}).default_queue == ""
    with pytest.raises(SpecError) as exc:
        DeploymentPolicy.from_env({"TFK8S_DEFAULT_QUEUE": "Not A Queue"})
    assert exc.value.fields == ("[tfk8s] default_queue",)


def test_the_waiting_line_of_the_progress_names_the_queue_or_the_foreign_gate():
    from tfk8s_airflow.job.run.judge import JobStatus, ReplicaState
    from tfk8s_airflow.job.states import JobState
    from tfk8s_airflow.k8s.watch import Snapshot
    from tfk8s_airflow.triggers.job import waiting_line

    held = ReplicaState("worker", 0, "p", "Pending", gated=True, held_by=("example.com/hold",))
    status = JobStatus(JobState.HELD, replicas={"worker-0": held})
    assert waiting_line(status, Snapshot(1, 0.0, status)) == "held by example.com/hold"
    queued = ReplicaState("worker", 0, "p", "Pending", gated=True, held_by=(kueue.ADMISSION_GATE,))
    status = JobStatus(JobState.QUEUED, replicas={"worker-0": queued})
    admission = kueue.Admission("j", "team-a", kueue.QUEUED, None, "waiting for quota", position=3)
    assert waiting_line(status, Snapshot(1, 0.0, status, admission=admission)) == \
        "queued in team-a, position 3: waiting for quota"
    running = JobStatus(JobState.RUNNING, replicas={"worker-0": ReplicaState("worker", 0, "p", "Running")})
    assert waiting_line(running, Snapshot(1, 0.0, running)) == ""
