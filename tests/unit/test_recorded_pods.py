"""Only the job's own pods speak for it: the judge counts the pods setup and recovery recorded by UID.

Anyone who may patch pods in the namespace can relabel a finished pod of their own as ``worker-0``
(labels, and the ``tfk8s.io/attempt`` label the judge once used to pick the newest pod of a replica).
Without the record such a pod made a running job succeed, or fail it by exiting 1.
"""

from tests.unit.test_status import T0, pod, policy
from tfk8s_airflow.job.run.judge import evaluate, replica_outcome
from tfk8s_airflow.job.run.records import JobRecord, ReplicaRef
from tfk8s_airflow.job.states import EndState, JobState


def _own(role, index, phase="Running", **kw):
    p = pod(role, index, phase, **kw)
    p["metadata"]["uid"] = f"uid-{role}-{index}"
    return p


def _stranger(role, index, phase, exit_code, attempt="99"):
    """A finished pod of someone else's, relabelled as a replica of the job (a newer attempt, too)."""
    p = pod(role, index, phase, exit_code=exit_code)
    p["metadata"].update(name="someone-elses-pod", uid="uid-stranger")
    p["metadata"]["labels"]["tfk8s.io/attempt"] = attempt
    return p


RECORDED = {f"uid-{r}-{i}": (f"{r}-{i}", 1) for r, i in (("ps", 0), ("worker", 0), ("worker", 1))}


def _job(*extra):
    return [_own("ps", 0), _own("worker", 0), _own("worker", 1), *extra]


def test_a_relabelled_finished_pod_does_not_make_the_job_succeed():
    pods = _job(_stranger("worker", 0, "Succeeded", 0))
    st = evaluate(pods, policy(), T0 + 30, T0, RECORDED)
    assert st.state == JobState.RUNNING
    assert st.replicas["worker-0"].pod == "job-worker-0"
    assert st.strangers == ("uid-stranger",)
    assert any(name == "someone-elses-pod" and "not the job's pod" in what for name, what in st.ignored)
    # Without the record (labels alone) the same pods were a success: what this guards against.
    assert evaluate(pods, policy(), T0 + 30, T0).state == JobState.SUCCEEDED


def test_a_relabelled_failed_pod_does_not_fail_the_job():
    pods = _job(_stranger("worker", 1, "Failed", 1))
    st = evaluate(pods, policy(), T0 + 30, T0, RECORDED)
    assert st.state == JobState.RUNNING and st.failed_pod is None
    assert evaluate(pods, policy(), T0 + 30, T0).state == JobState.FAILED


def test_the_outcome_is_the_own_pods_outcome():
    pods = [_own("ps", 0), _own("worker", 0, "Failed", exit_code=3), _own("worker", 1),
            _stranger("worker", 0, "Succeeded", 0)]
    st = evaluate(pods, policy(), T0 + 30, T0, RECORDED)
    assert st.state == JobState.FAILED and st.failed_pod == "job-worker-0" and "exit code 3" in st.reason
    outcome = replica_outcome(st, "worker-0", tracked=True)
    assert outcome is not None and outcome.state == EndState.FAILED


def test_an_own_pod_relabelled_as_another_replica_stays_what_the_record_says():
    ps = _own("ps", 0, "Succeeded", exit_code=0)
    ps["metadata"]["labels"].update({"tfk8s.io/role": "worker", "tfk8s.io/index": "0"})
    st = evaluate([ps, _own("worker", 0), _own("worker", 1)], policy(), T0 + 30, T0, RECORDED)
    # Still ps-0 (an untracked replica that exited: the job fails), never worker-0 succeeding.
    assert st.state == JobState.FAILED and "ps-0" in st.reason
    assert any("the record's are taken" in what for _, what in st.ignored)


def test_the_attempt_is_the_records_not_the_label():
    old = _own("worker", 0, "Failed", exit_code=1)
    old["metadata"].update(uid="uid-old", name="job-worker-0-a1")
    old["metadata"]["labels"]["tfk8s.io/attempt"] = "7"  # relabelled to look newest
    new = _own("worker", 0, "Succeeded", exit_code=0)
    new["metadata"].update(uid="uid-new", name="job-worker-0-a2")
    recorded = {**RECORDED, "uid-old": ("worker-0", 1), "uid-new": ("worker-0", 2)}
    del recorded["uid-worker-0"]
    st = evaluate([_own("ps", 0), old, new, _own("worker", 1)], policy(), T0 + 30, T0, recorded)
    assert st.state == JobState.SUCCEEDED and st.replicas["worker-0"].pod == "job-worker-0-a2"


def test_a_replica_whose_own_pod_is_gone_is_missing_whatever_wears_its_labels():
    pods = [_own("ps", 0), _own("worker", 1), _stranger("worker", 0, "Running", None)]
    st = evaluate(pods, policy(), T0 + 30, T0, RECORDED)
    assert st.state == JobState.FAILED and "worker-0 has no pod" in st.reason and st.strangers


def test_pods_that_name_no_replica_are_not_strangers():
    tensorboard = pod("ps", 0)
    tensorboard["metadata"] = {"name": "job-tensorboard", "uid": "uid-tb", "labels": {"tfk8s.io/job": "job"}}
    st = evaluate(_job(tensorboard), policy(), T0 + 30, T0, RECORDED)
    assert st.strangers == () and st.ignored == ()


def test_the_record_carries_uids_and_reads_back():
    rec = JobRecord(job="j", namespace="ns", service="j", configmap="j", selector="tfk8s.io/job=j",
                    policy=policy(), replicas=(ReplicaRef("worker-0", "worker", 0, "j-worker-0", True, uid="u1"),),
                    created_at=T0, service_uid="svc-uid")
    back = JobRecord.from_xcom(rec.to_xcom())
    assert back.recorded_pods() == {"u1": ("worker-0", 1)} and back.service_uid == "svc-uid"
    old = rec.to_xcom()
    for r in old["replicas"]:
        r.pop("uid")
    old.pop("service_uid")
    assert JobRecord.from_xcom(old).recorded_pods() is None  # a record from before UIDs: labels, as then


def test_recoverys_record_of_its_pods_is_validated():
    from tfk8s_airflow.job.run.recoverystate import read_recreated

    rec = JobRecord(job="j", namespace="ns", service="j", configmap="j", selector="tfk8s.io/job=j",
                    policy=policy(), replicas=(ReplicaRef("worker-0", "worker", 0, "j-worker-0", True, uid="u1"),),
                    created_at=T0)
    ok = '{"attempts": [], "pods": [{"uid": "0a1b-2c", "name": "j-worker-0", "key": "worker-0", "attempt": 2}]}'
    assert read_recreated(ok, rec) == {"0a1b-2c": ("j-worker-0", "worker-0", 2)}
    for bad in ('{"pods": [{"uid": "x y", "name": "j-worker-0", "key": "worker-0", "attempt": 2}]}',
                '{"pods": [{"uid": "0a", "name": "j-worker-0", "key": "chief-0", "attempt": 2}]}',
                '{"pods": [{"uid": "0a", "name": "j-worker-0", "key": "worker-0", "attempt": 1}]}',
                '{"pods": {"0a": 1}}', '{"other": 1}'):
        try:
            read_recreated(bad, rec)
        except ValueError:
            continue
        raise AssertionError(f"accepted {bad}")


def test_the_view_shows_the_jobs_own_pods_only():
    from tfk8s_airflow.ui.sources import _own

    rec = JobRecord(job="j", namespace="ns", service="j", configmap="j", selector="tfk8s.io/job=j",
                    policy=policy(), replicas=(ReplicaRef("worker-0", "worker", 0, "j-worker-0", True, uid="u1"),),
                    created_at=T0, service_uid="svc")
    recreated = {"metadata": {"uid": "u2", "ownerReferences": [{"kind": "Service", "uid": "svc"}]}}
    assert _own(rec, {"metadata": {"uid": "u1"}}) and _own(rec, recreated)
    assert not _own(rec, _stranger("worker", 0, "Succeeded", 0))
