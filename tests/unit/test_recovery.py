"""The recovery planner: which failures restart the group, replace a replica, or end the job."""
import dataclasses

import pytest

from tfk8s_airflow.job.run.judge import JobStatus, ReplicaState
from tfk8s_airflow.job.run.records import Attempt
from tfk8s_airflow.job.run.recovery import FAIL, NONE, REPLACE, RESTART_GROUP, Progress, RecoveryPolicy, decide
from tfk8s_airflow.job.states import JobState

ROLES = {"ps-0": "ps", "worker-0": "worker", "worker-1": "worker"}
T = 1_000.0


def replicas(**over):
    base = {k: ReplicaState(role=r, index=int(k[-1]), pod=f"j-{k}", phase="Running", node="n1")
            for k, r in ROLES.items()}
    for key, fields in over.items():
        base[key.replace("_", "-")] = dataclasses.replace(base[key.replace("_", "-")], **fields)
    return base


def failed(key, cls, **over):
    return JobStatus(JobState.FAILED, f"{key} failed", replicas(**over), f"j-{key}", {}, "tensorflow", cls, key)


def running(**over):
    return JobStatus(JobState.RUNNING, "", replicas(**over))


def attempt(n, cls):
    return Attempt(number=n, failure_class=cls, reason=f"earlier {cls}", at=T)


def test_infrastructure_replaces_a_worker_and_restarts_the_group_for_a_ps_within_its_budget():
    d = decide(failed("worker-1", "infrastructure"), RecoveryPolicy(), [], T, roles=ROLES)
    assert (d.action, d.replicas, d.failure_class) == (REPLACE, ("worker-1",), "infrastructure")
    d = decide(failed("ps-0", "infrastructure"), RecoveryPolicy(), [], T, roles=ROLES)
    assert d.action == RESTART_GROUP and set(d.replicas) == set(ROLES)
    spent = [attempt(2, "infrastructure"), attempt(3, "infrastructure"), attempt(4, "infrastructure")]
    d = decide(failed("ps-0", "infrastructure"), RecoveryPolicy(infra_restarts=3), spent, T, roles=ROLES)
    assert d.action == FAIL and "infra_restarts 3 spent" in d.reason and "attempt 1 ended by infrastructure" in d.reason


def test_infrastructure_never_spends_the_code_budget_and_code_restarts_only_with_a_budget():
    assert decide(failed("worker-0", "code"), RecoveryPolicy(), [], T, roles=ROLES).action == FAIL
    d = decide(failed("worker-0", "code"), RecoveryPolicy(group_restarts=1), [attempt(2, "infrastructure")], T,
               roles=ROLES)
    assert d.action == RESTART_GROUP  # the infrastructure attempt did not use the code budget
    d = decide(failed("worker-0", "code"), RecoveryPolicy(group_restarts=1), [attempt(2, "code")], T, roles=ROLES)
    assert d.action == FAIL and "group_restarts 1 spent" in d.reason


def test_config_and_straggler_never_restart():
    for cls in ("config", "straggler"):
        d = decide(failed("worker-0", cls), RecoveryPolicy(group_restarts=5, infra_restarts=5), [], T, roles=ROLES)
        assert d.action == FAIL and d.failure_class == cls


def test_oom_relaunches_with_more_memory_up_to_the_cap():
    policy = RecoveryPolicy(oom_memory_factor=1.5, max_memory=4 * 2**30)
    mem = {"worker-1": 2 * 2**30, "ps-0": 2 * 2**30}
    d = decide(running(worker_1={"oom": True}), policy, [], T, roles=ROLES, memory=mem)
    assert d.action == REPLACE and d.replicas == ("worker-1",) and d.memory == {"worker-1": 3 * 2**30}
    d = decide(failed("ps-0", "oom", ps_0={"oom": True}), policy, [], T, roles=ROLES, memory=mem)
    assert d.action == RESTART_GROUP and d.memory == {"ps-0": 3 * 2**30}
    d = decide(running(worker_1={"oom": True}), policy, [], T, roles=ROLES, memory={"worker-1": 3 * 2**30})
    assert d.action == FAIL and d.failure_class == "oom" and "would exceed max_memory 4.00Gi" in d.reason
    d = decide(failed("worker-1", "oom"), RecoveryPolicy(), [], T, roles=ROLES, memory=mem)
    assert d.action == FAIL and "oom_memory_factor" in d.reason


def test_a_lost_node_replaces_its_replicas_after_the_grace_avoiding_it():
    policy = RecoveryPolicy(node_lost_grace=60)
    status = running(worker_1={"node": "n2"})
    assert decide(status, policy, [], T, roles=ROLES, lost_nodes={"n2": T - 30}).action == NONE
    d = decide(status, policy, [], T, roles=ROLES, lost_nodes={"n2": T - 61})
    assert (d.action, d.replicas, d.avoid_nodes) == (REPLACE, ("worker-1",), ("n2",))
    d = decide(running(ps_0={"node": "n2"}), policy, [], T, roles=ROLES, lost_nodes={"n2": T - 61})
    assert d.action == RESTART_GROUP and d.avoid_nodes == ("n2",)


def test_no_progress_for_the_timeout_is_a_stall():
    policy = RecoveryPolicy(progress_timeout=120)
    assert decide(running(), policy, [], T, roles=ROLES, progress=Progress(300, T - 100)).action == NONE
    d = decide(running(), policy, [], T, roles=ROLES, progress=Progress(300, T - 121))
    assert d.action == FAIL and d.failure_class == "stalled" and "stalled at step 300" in d.reason
    d = decide(running(), dataclasses.replace(policy, group_restarts=1), [], T, roles=ROLES,
               progress=Progress(300, T - 121))
    assert d.action == RESTART_GROUP and d.failure_class == "stalled"


# ------------------------------------------------------------------------------ ExitCode, as TFJob does it
def _exit_code_job():
    from tfk8s_airflow.job.spec import parse_spec
    return parse_spec({"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": "ec"},
                                "spec": {"runPolicy": {"backoffLimit": 2}, "tfReplicaSpecs": {
                                    "PS": {"template": {"spec": {"containers": [
                                        {"name": "tensorflow", "image": "tf:1"}]}}},
                                    "Worker": {"replicas": 2, "restartPolicy": "ExitCode", "template": {"spec": {
                                        "containers": [{"name": "tensorflow", "image": "tf:1"}]}}}}}})


def _judged(spec, exit_codes):
    """The job's rendered pods, Running, with the workers in exit_codes ended Failed with that code."""
    from tfk8s_airflow.job.builders.objects import JobNames
    from tfk8s_airflow.job.builders.plan import plan_job
    from tfk8s_airflow.job.policy import DeploymentPolicy
    from tfk8s_airflow.job.run.judge import JobPolicy, evaluate

    pods = list(plan_job(spec, JobNames.for_run(spec, "r1"), DeploymentPolicy()).pods)
    for pod in pods:
        key = f"{pod['metadata']['labels']['tfk8s.io/role']}-{pod['metadata']['labels']['tfk8s.io/index']}"
        code = exit_codes.get(key)
        state = {"running": {"startedAt": "2026-01-01T00:00:00Z"}} if code is None else {
            "terminated": {"exitCode": code, "reason": "Error"}}
        pod["status"] = {"phase": "Running" if code is None else "Failed", "containerStatuses": [
            {"name": "tensorflow", "restartCount": 0, "state": state}]}
    return evaluate(pods, JobPolicy.from_spec(spec), T, T)


def test_exit_code_pods_are_never_restarted_in_place():
    from tfk8s_airflow.job.builders.objects import JobNames
    from tfk8s_airflow.job.builders.plan import plan_job
    from tfk8s_airflow.job.policy import DeploymentPolicy

    spec = _exit_code_job()
    policies = {(o["metadata"]["labels"]["tfk8s.io/role"], o["spec"]["restartPolicy"])
                for o in plan_job(spec, JobNames.for_run(spec, "r1"), DeploymentPolicy()).pods}
    assert policies == {("ps", "Never"), ("worker", "Never")}  # TFJob: ExitCode -> Never


def test_a_permanent_exit_code_fails_the_job_at_once():
    spec = _exit_code_job()
    status = _judged(spec, {"worker-1": 1})
    assert status.state == JobState.FAILED and "1-127 are permanent" in status.reason
    roles = {f"{r.role}-{i}": r.role for r in spec.active_roles for i in range(r.replicas)}
    d = decide(status, RecoveryPolicy.from_spec(spec), [], T, roles=roles)
    assert d.action == FAIL and d.failure_class == "code"


def test_a_retryable_exit_code_recreates_the_pod_within_max_restarts():
    spec = _exit_code_job()
    policy = RecoveryPolicy.from_spec(spec)
    assert policy.exit_code_roles == ("worker",) and policy.max_restarts == 2
    assert RecoveryPolicy.from_dict(policy.to_dict()) == policy  # it travels in the job record
    roles = {f"{r.role}-{i}": r.role for r in spec.active_roles for i in range(r.replicas)}
    for code in (137, 139, 138):  # SIGKILL, the program's own SIGSEGV, the runtime's retryable code: all >= 128
        d = decide(_judged(spec, {"worker-1": code}), policy, [], T, roles=roles)
        assert (d.action, d.replicas) == (REPLACE, ("worker-1",)), (code, d)
        assert "ExitCode recreates the pod" in d.reason and "1 of max_restarts 2" in d.reason
    done = [Attempt(number=n + 2, failure_class="infrastructure", reason=d.reason, at=T, action=REPLACE,
                    replicas=("worker-1",)) for n in range(2)]
    status = _judged(spec, {"worker-1": 137})
    d = decide(status, policy, done, T, roles=roles)
    assert d.action == FAIL and "at most max_restarts 2 times, spent" in d.reason
    other = decide(_judged(spec, {"worker-0": 137}), policy, done, T, roles=roles)  # the budget is per replica
    assert other.action == REPLACE and other.replicas == ("worker-0",)
    # Never and OnFailure roles are not recreated for a code the program raised itself
    never = dataclasses.replace(policy, exit_code_roles=())
    assert decide(_judged(spec, {"worker-1": 139}), never, [], T, roles=roles).action == FAIL


def _template(memory: str | None) -> dict:
    from tfk8s_airflow.contract import CONTAINER_NAME
    res = {"requests": {"memory": memory}, "limits": {"memory": memory}} if memory else {}
    return {"metadata": {"name": "j-worker-0", "labels": {}},
            "spec": {"containers": [{"name": CONTAINER_NAME, "image": "i:1", "resources": res}]}}


def _memory(pod: dict) -> tuple[str | None, str | None]:
    res = pod["spec"]["containers"][0].get("resources") or {}
    return (res.get("requests") or {}).get("memory"), (res.get("limits") or {}).get("memory")


def test_a_memory_override_below_the_specs_memory_is_clamped_up_to_it():
    """Issue 37: an override of 1e-300 (a rewritten tfk8s.io/attempts) rendered as memory "0", no limit at
    all; a recreated replica never gets less memory than its spec asked."""
    from tfk8s_airflow.k8s.relaunch import rebuilt
    four_gib = str(4 * 2**30)
    for hostile in (1e-300, 0.5, 1, 2**30):
        assert _memory(rebuilt(_template("4Gi"), 2, {"memory": hostile})) == (four_gib, four_gib), hostile
    # A relaunch that grows memory is unchanged, and a replica whose spec set no memory gets none.
    assert _memory(rebuilt(_template("4Gi"), 2, {"memory": 6 * 2**30 + 0.5})) == (str(6 * 2**30),) * 2
    assert _memory(rebuilt(_template(None), 2, {"memory": 1e-300})) == (None, None)


def test_relaunch_memory_is_bounded_below_by_the_specs_memory():
    from tfk8s_airflow.job.run.recovery import relaunch_memory
    assert relaunch_memory(4e9, 1e-300) == 4_000_000_000 and relaunch_memory(4e9, 6e9) == 6_000_000_000
    assert relaunch_memory(None, 6e9) is None and relaunch_memory(4e9, float("nan")) is None
    assert relaunch_memory(4e9, True) is None and relaunch_memory(4e9, "1") is None


def test_an_oom_memory_factor_that_would_not_grow_memory_is_refused_naming_the_field():
    """The factor's own bound (the relaunch's memory is never below the spec's, above): a factor at or
    below 1 (``1e-300`` would shrink a relaunched replica's memory to "0", no limit) is refused when the
    spec is read, naming oom_memory_factor and the range; 10 is the most a factor may be."""
    from tfk8s_airflow.exceptions import SpecError
    from tfk8s_airflow.job.spec import parse_spec
    from tfk8s_airflow.job.spec.parse.recovery import FACTOR_RANGE

    assert FACTOR_RANGE == (1.0, 10.0)
    doc = {"name": "j", "image": "i:1", "worker": 1, "resources": {"memory": "4Gi"}}
    for factor in (1e-300, 0, 0.5, 1, -2, 10.5, "nan", "inf"):
        with pytest.raises(SpecError) as info:
            parse_spec({**doc, "oom_memory_factor": factor})
        assert [p.field for p in info.value.problems] == ["oom_memory_factor"], (factor, info.value)
        assert "above 1" in str(info.value) or "must be a number" in str(info.value), (factor, info.value)
    assert parse_spec({**doc, "oom_memory_factor": 1.01}).oom_memory_factor == 1.01
    assert parse_spec({**doc, "oom_memory_factor": 10}).oom_memory_factor == 10


def test_a_recovery_attempt_of_a_gang_scheduled_job_joins_a_podgroup_of_its_own():
    from tfk8s_airflow.job import podgroup
    from tfk8s_airflow.k8s.relaunch import rebuilt

    template = podgroup.in_pod_group(_template("4Gi"), "job")
    pod = rebuilt(template, 3, {}, pod_group=podgroup.group_name("job", 3))
    assert podgroup.pod_group_of(pod) == "job-a3" and pod["metadata"]["name"] == template["metadata"]["name"]
    assert podgroup.pod_group_of(template) == "job"  # the template is not changed
    assert podgroup.pod_group_of(rebuilt(_template("4Gi"), 3, {})) is None  # a job without one gets none
