"""The job judge: every success and failure rule, from pod JSON as the API returns it."""
from datetime import UTC

from tfk8s_airflow.job.judge import FAILED, RUNNING, SUCCEEDED, JobPolicy, evaluate
from tfk8s_airflow.job.spec import TFJobSpec

T0 = 1_800_000_000.0


def iso(t):
    from datetime import datetime
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod(role, index, phase="Running", *, restarts=0, exit_code=None, last_exit=None, waiting=None,
        unschedulable=None, created=T0, deleting=False):
    cs = {"name": "tensorflow", "restartCount": restarts, "state": {}}
    if phase == "Running":
        cs["state"] = {"running": {"startedAt": iso(created + 1)}}
    if exit_code is not None:
        cs["state"] = {"terminated": {"exitCode": exit_code, "startedAt": iso(created + 1),
                                      "finishedAt": iso(created + 11)}}
    if waiting:
        cs["state"] = {"waiting": {"reason": waiting, "message": "pull failed"}}
    if last_exit is not None:
        cs["lastState"] = {"terminated": {"exitCode": last_exit}}
    status = {"phase": phase, "containerStatuses": [cs]}
    if unschedulable:
        status = {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
                                                      "reason": "Unschedulable", "message": unschedulable}]}
    meta = {"name": f"job-{role}-{index}", "creationTimestamp": iso(created),
            "labels": {"tfk8s.io/role": role, "tfk8s.io/index": str(index)}}
    if deleting:
        meta["deletionTimestamp"] = iso(created + 5)
    return {"metadata": meta, "status": status}


def policy(**kw):
    base = {"name": "j", "image": "i:1", "ps": 1, "worker": 2, "schedule_timeout": 60,
            "startup_timeout": 120, "max_restarts": 2}
    base.update(kw)
    return JobPolicy.from_spec(TFJobSpec.from_dict(base))


def test_default_policy_worker0_success_while_ps_runs():
    pods = [pod("ps", 0), pod("worker", 0, "Succeeded", exit_code=0), pod("worker", 1, "Succeeded", exit_code=0)]
    st = evaluate(pods, policy(), T0 + 30, T0)
    assert st.state == SUCCEEDED and "worker-0" in st.reason
    assert st.summary("job", "ns")["replicas"]["worker-0"]["duration_s"] == 10.0


def test_running_until_policy_met_and_all_workers_policy():
    pods = [pod("ps", 0), pod("worker", 0, "Succeeded", exit_code=0), pod("worker", 1)]
    assert evaluate(pods, policy(success_policy="all_workers"), T0 + 30, T0).state == RUNNING
    assert evaluate(pods, policy(), T0 + 30, T0).state == SUCCEEDED


def test_tf2_layout_chief_decides():
    p = policy(chief=1, worker={"replicas": 2, "tracked": False})
    pods = [pod("chief", 0, "Succeeded", exit_code=0), pod("ps", 0), pod("worker", 0), pod("worker", 1)]
    assert evaluate(pods, p, T0 + 30, T0).state == SUCCEEDED
    assert evaluate(pods[1:] + [pod("chief", 0)], p, T0 + 30, T0).state == RUNNING


def test_worker_failure_names_exit_code():
    pods = [pod("ps", 0), pod("worker", 0), pod("worker", 1, "Failed", exit_code=1)]
    st = evaluate(pods, policy(), T0 + 30, T0)
    assert st.state == FAILED and "worker-1" in st.reason and "exit code 1" in st.reason
    assert st.failed_pod == "job-worker-1"


def test_dead_parameter_server_fails_the_job():
    for ps in (pod("ps", 0, "Failed", exit_code=137), pod("ps", 0, "Succeeded", exit_code=0)):
        st = evaluate([ps, pod("worker", 0), pod("worker", 1)], policy(), T0 + 30, T0)
        assert st.state == FAILED and "untracked replica ps-0" in st.reason


def test_restart_budget():
    pods = [pod("ps", 0), pod("worker", 0, restarts=2, last_exit=1), pod("worker", 1)]
    assert evaluate(pods, policy(), T0 + 30, T0).state == RUNNING
    pods[1] = pod("worker", 0, restarts=3, last_exit=1)
    st = evaluate(pods, policy(), T0 + 30, T0)
    assert st.state == FAILED and "restarted 3 times" in st.reason and "max_restarts 2" in st.reason


def test_exit_code_policy_permanent_vs_retryable():
    p = policy(restart_policy="ExitCode")
    retryable = [pod("ps", 0), pod("worker", 0, restarts=1, last_exit=137), pod("worker", 1)]
    assert evaluate(retryable, p, T0 + 30, T0).state == RUNNING
    permanent = [pod("ps", 0), pod("worker", 0, restarts=1, last_exit=2), pod("worker", 1)]
    st = evaluate(permanent, p, T0 + 30, T0)
    assert st.state == FAILED and "permanent exit code 2" in st.reason


def test_unschedulable_only_after_schedule_timeout():
    pods = [pod("ps", 0), pod("worker", 0, unschedulable="0/2 nodes are available: 2 Insufficient nvidia.com/gpu."),
            pod("worker", 1)]
    assert evaluate(pods, policy(), T0 + 30, T0).state == RUNNING
    st = evaluate(pods, policy(), T0 + 61, T0)
    assert st.state == FAILED and "Unschedulable" in st.reason and "Insufficient nvidia.com/gpu" in st.reason


def test_image_pull_fails_fast():
    pods = [pod("ps", 0, "Pending", waiting="ImagePullBackOff"), pod("worker", 0), pod("worker", 1)]
    st = evaluate(pods, policy(), T0 + 2, T0)
    assert st.state == FAILED and "ImagePullBackOff" in st.reason


def test_startup_timeout_and_missing_replicas():
    pending = [pod("ps", 0, "Pending"), pod("worker", 0), pod("worker", 1)]
    assert evaluate(pending, policy(), T0 + 100, T0).state == RUNNING
    assert "has not started" in evaluate(pending, policy(), T0 + 121, T0).reason
    missing = [pod("ps", 0), pod("worker", 0)]
    assert evaluate(missing, policy(), T0 + 100, T0).state == RUNNING
    st = evaluate(missing, policy(), T0 + 121, T0)
    assert st.state == FAILED and "worker-1 has no pod" in st.reason


def test_active_deadline_enforced_on_every_poll():
    pods = [pod("ps", 0), pod("worker", 0), pod("worker", 1)]
    assert evaluate(pods, policy(active_deadline=300), T0 + 299, T0).state == RUNNING
    st = evaluate(pods, policy(active_deadline=300), T0 + 301, T0)
    assert st.state == FAILED and "active_deadline" in st.reason


def test_pods_being_deleted_are_ignored_and_policy_round_trips():
    p = policy()
    assert JobPolicy.from_dict(p.to_dict()) == p
    pods = [pod("ps", 0), pod("worker", 0, "Succeeded", exit_code=0, deleting=True), pod("worker", 1)]
    assert evaluate(pods, p, T0 + 30, T0).state == RUNNING
