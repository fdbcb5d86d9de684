"""The job's TensorBoard: the spec key, its pod (in the plan render prints), the URL template, the record, and
that nothing about it ever changes a job's outcome."""
import dataclasses

import kubernetes_validate
import pytest

from tests.unit.test_status import T0, iso, pod
from tfk8s_airflow.exceptions import SpecError
from tfk8s_airflow.job.builders import quota
from tfk8s_airflow.job.builders.objects import JobNames, plan_replicas
from tfk8s_airflow.job.builders.plan import plan_job
from tfk8s_airflow.job.builders.render import parse_yaml, render_yaml
from tfk8s_airflow.job.builders.tensorboard import (
    TensorBoardState,
    plan_tensorboard,
    tensorboard_state,
    tensorboard_url,
)
from tfk8s_airflow.job.policy import DeploymentPolicy
from tfk8s_airflow.job.policy.tensorboard_url import fill_url, static_url, url_template_problem
from tfk8s_airflow.job.run.judge import JobPolicy, evaluate, replica_outcome, replica_state
from tfk8s_airflow.job.run.records import JobRecord
from tfk8s_airflow.job.run.recovery import RecoveryPolicy, decide
from tfk8s_airflow.job.run.resolve import job_record
from tfk8s_airflow.job.spec import parse_spec
from tfk8s_airflow.job.states import JobState

MODEL = {"name": "model", "mount_path": "/model", "host_path": "/mnt/tfk8s-gluster/models/ctr"}
BASE = {"name": "ctr", "image": "trainer:2.21", "ps": 1, "worker": 2, "volumes": [MODEL]}


def spec(**kw):
    return parse_spec({**BASE, **kw})


def names_for(s):
    return JobNames.for_run(s, "manual__2026-02-01T00:00:00+00:00", "train", "tfk8s_train_manual")


def by_kind(objs, kind):
    return [o for o in objs if o["kind"] == kind]


# ----------------------------------------------------------------------------- the spec key
def test_tensorboard_true_serves_the_model_volume_on_port_6006():
    tb = spec(tensorboard=True).tensorboard
    assert (tb.log_dir, tb.port, tb.image) == ("/model", 6006, None)
    assert spec(tensorboard={"enabled": False}).tensorboard is None and spec().tensorboard is None
    again = spec(tensorboard={"log_dir": "/model/train/", "port": 7007, "image": "tb:2.21"})
    assert parse_spec(again.to_dict()) == again and again.tensorboard.log_dir == "/model/train"


@pytest.mark.parametrize("value,field,words", [
    ({"log_dir": "/elsewhere"}, "tensorboard.log_dir", "under none of the job's host_path or pvc volumes"),
    ({"port": 2222}, "tensorboard.port", "TensorFlow port"),
    ({"log_dir": "/model/../etc"}, "tensorboard.log_dir", "without '..'"),
    ({"enabled": True, "logdir": "/model"}, "tensorboard.logdir", ""),
    ("yes", "tensorboard", "true or a mapping"),
])
def test_a_bad_tensorboard_is_refused_naming_the_field(value, field, words):
    with pytest.raises(SpecError) as err:
        spec(tensorboard=value)
    assert field in str(err.value) and words in str(err.value)


def test_without_a_model_volume_log_dir_is_required():
    with pytest.raises(SpecError, match="tensorboard.log_dir: is required"):
        parse_spec({**BASE, "volumes": [], "tensorboard": True})


# ----------------------------------------------------------------------------- the pod
def test_the_tensorboard_pod_serves_log_dir_read_only_with_the_jobs_labels_but_no_replica_labels():
    s = spec(tensorboard=True, annotations={"team": "ads"},
             worker={"replicas": 2, "node_selector": {"pool": "cpu"},
                     "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}]})
    names = names_for(s)
    objs = plan_job(s, names, DeploymentPolicy()).objects()
    tb = objs[-1]
    assert tb["metadata"]["name"] == f"{names.job}-tensorboard" and len(tb["metadata"]["name"]) <= 63
    labels = tb["metadata"]["labels"]
    assert labels["tfk8s.io/job"] == names.job and labels["app.kubernetes.io/component"] == "tensorboard"
    assert not {"tfk8s.io/role", "tfk8s.io/index", "tfk8s.io/tracked"} & set(labels)
    assert tb["metadata"]["annotations"] == {"team": "ads"}
    spec_ = tb["spec"]
    assert (spec_["hostname"], spec_["subdomain"], spec_["restartPolicy"]) == ("tensorboard", names.service, "Always")
    assert "schedulingGates" not in spec_ and spec_["automountServiceAccountToken"] is False
    assert spec_["nodeSelector"] == {"pool": "cpu"} and spec_["tolerations"][0]["key"] == "k"  # the lead's
    (c,) = spec_["containers"]
    assert c["command"] == ["tensorboard"]
    assert c["args"] == ["--logdir", "/model", "--host", "0.0.0.0", "--port", "6006"]
    assert c["ports"] == [{"name": "tensorboard", "containerPort": 6006, "protocol": "TCP"}]
    assert c["volumeMounts"] == [{"name": "model", "mountPath": "/model", "readOnly": True}]
    assert spec_["volumes"] == [{"name": "model", "hostPath": {"path": "/mnt/tfk8s-gluster/models/ctr",
                                                               "type": "DirectoryOrCreate"}}]
    assert "env" not in c  # no TF_CONFIG, none of the job's env values
    assert c["readinessProbe"]["httpGet"] == {"path": "/", "port": "tensorboard"}
    assert c["resources"]["requests"] == {"cpu": "100m", "memory": "256Mi"} and c["resources"]["limits"]
    # The deployment's restricted security context, as the replicas get it.
    replica = by_kind(objs, "Pod")[0]
    assert c["securityContext"] == replica["spec"]["containers"][0]["securityContext"]
    assert spec_["securityContext"] == replica["spec"]["securityContext"]
    assert spec_["activeDeadlineSeconds"] == replica["spec"]["activeDeadlineSeconds"]
    for obj in objs:
        kubernetes_validate.validate(obj, "1.37.0", strict=True)
    # Only the replicas are planned as replicas.
    assert len(plan_replicas(s, names)) == 3 and len(by_kind(objs, "Pod")) == 4


def test_the_service_gets_the_tensorboard_port_only_when_enabled():
    without = plan_job(spec(), names_for(spec()), DeploymentPolicy()).service["spec"]["ports"]
    assert [p["name"] for p in without] == ["tfjob-port"]
    s = spec(tensorboard={"port": 7007})
    ports = plan_job(s, names_for(s), DeploymentPolicy()).service["spec"]["ports"]
    assert ports[1] == {"name": "tensorboard", "port": 7007, "targetPort": 7007, "protocol": "TCP"}


def test_the_image_is_the_tensorboards_own_or_the_leads_and_the_inner_volume_is_mounted():
    s = spec(tensorboard={"log_dir": "/model/runs/a", "image": "tensorboard:2.21"},
             volumes=[MODEL, {"name": "runs", "mount_path": "/model/runs", "pvc": "runs", "sub_path": "x"}],
             chief={"replicas": 1, "image": "chief:1"})
    plan = plan_tensorboard(s, names_for(s))
    assert plan.image == "tensorboard:2.21" and plan.volume_mounts == [
        {"name": "runs", "mountPath": "/model/runs", "readOnly": True, "subPath": "x"}]
    assert plan.volumes == [{"name": "runs", "persistentVolumeClaim": {"claimName": "runs", "readOnly": False}}]
    assert plan_tensorboard(spec(tensorboard=True, chief={"replicas": 1, "image": "chief:1"}),
                            names_for(s)).image == "chief:1"


def test_render_prints_the_plans_tensorboard_and_the_policy_applies():
    s = spec(tensorboard=True, service_account="tf")
    names = names_for(s)
    policy = DeploymentPolicy(restricted_security_context=False, run_as_non_root=True, allowed_service_accounts=("tf",))
    plan = plan_job(s, names, policy)
    objs = plan.objects()
    assert parse_yaml(render_yaml(plan)) == objs and objs[-1] == plan.tensorboard_pod
    tb = objs[-1]["spec"]
    assert tb["securityContext"] == {"runAsNonRoot": True} and "securityContext" not in tb["containers"][0]
    assert tb["serviceAccountName"] == "tf" and tb["automountServiceAccountToken"] is False


def test_the_quota_counts_the_tensorboard_pod():
    without, with_tb = quota.job_requests(spec()), quota.job_requests(spec(tensorboard=True))
    assert with_tb["pods"] == without["pods"] + 1 == 4 and with_tb["count/pods"] == 4
    assert with_tb["requests.cpu"] == pytest.approx(without.get("requests.cpu", 0) + 0.1)
    assert with_tb["limits.memory"] == pytest.approx(without.get("limits.memory", 0) + 2 * 2**30)


# ----------------------------------------------------------------------------- never counted
def tensorboard_pod(phase="Running", *, restarts=0, waiting=None, ready=True, ip="10.213.0.9", deleting=False,
                    name="job-tensorboard"):
    cs = {"name": "tensorboard", "restartCount": restarts, "state": {"running": {"startedAt": iso(T0)}}}
    if waiting:
        cs["state"] = {"waiting": {"reason": waiting}}
    if phase == "Failed":
        cs["state"] = {"terminated": {"exitCode": 1, "finishedAt": iso(T0 + 5)}}
    meta = {"name": name, "creationTimestamp": iso(T0),
            "labels": {"tfk8s.io/job": "job", "app.kubernetes.io/component": "tensorboard"}}
    if deleting:
        meta["deletionTimestamp"] = iso(T0 + 5)
    status = {"phase": phase, "containerStatuses": [cs], "podIP": ip,
              "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    return {"metadata": meta, "status": status}


BROKEN = [tensorboard_pod("Failed", ready=False), tensorboard_pod(restarts=40, waiting="CrashLoopBackOff", ready=False),
          tensorboard_pod("Pending", waiting="ImagePullBackOff", ready=False, ip=None),
          tensorboard_pod(deleting=True), tensorboard_pod("Succeeded", ready=False)]
JOBS = {
    "running": [pod("ps", 0), pod("worker", 0), pod("worker", 1)],
    "succeeded": [pod("ps", 0), pod("worker", 0, "Succeeded", exit_code=0), pod("worker", 1, "Succeeded", exit_code=0)],
    "failed": [pod("ps", 0), pod("worker", 0, "Failed", exit_code=1), pod("worker", 1)],
}


@pytest.mark.parametrize("job", sorted(JOBS))
@pytest.mark.parametrize("tb", range(len(BROKEN) + 1), ids=["ready", "failed", "crashloop", "image-pull", "deleting",
                                                              "exited"])
def test_a_tensorboard_pod_never_changes_a_jobs_outcome(job, tb):
    """Whatever the TensorBoard does (serves, fails, crashloops, cannot pull, is deleted, exits), the
    judge, the recovery planner and every replica task see the job exactly as without it."""
    policy = JobPolicy.from_dict({**JobPolicy.from_spec(spec()).to_dict(), "max_restarts": 2})
    tb_pod = ([tensorboard_pod()] + BROKEN)[tb]
    assert replica_state(tb_pod) is None  # the view's live rows skip it too
    now = T0 + 30
    alone, beside = evaluate(JOBS[job], policy, now, T0), evaluate([*JOBS[job], tb_pod], policy, now, T0)
    assert beside == alone and alone.state == JobState(job)
    recovery = RecoveryPolicy(group_restarts=2, infra_restarts=3)
    roles = {"ps-0": "ps", "worker-0": "worker", "worker-1": "worker"}
    assert decide(beside, recovery, [], now, roles=roles) == decide(alone, recovery, [], now, roles=roles)
    for key, tracked in (("ps-0", False), ("worker-0", True), ("worker-1", True)):
        assert replica_outcome(beside, key, tracked) == replica_outcome(alone, key, tracked)


# ----------------------------------------------------------------------------- the URL
@pytest.mark.parametrize("template", ["http://{pod_ip}:{port}/", "https://tb.example.com/{namespace}/{job}/",
                                      "http://{host}:{port}", "https://proxy/{pod}?x={{literal}}"])
def test_good_url_templates(template):
    assert url_template_problem(template) is None


@pytest.mark.parametrize("template,words", [
    ("http://{ip}/", "{ip}"), ("http://{pod_ip!r}/", "{pod_ip!r}"), ("http://{job.__class__}/", "{job.__class__}"),
    ("http://{pod_ip", "literal braces"), ("{pod_ip}:{port}", "absolute http(s) URL"),
    ("javascript:alert({job})", "absolute http(s) URL"), ("file:///{job}", "absolute http(s) URL"),
])
def test_bad_url_templates_are_refused_as_a_setting(template, words):
    assert words in url_template_problem(template)
    with pytest.raises(SpecError, match=r"\[tfk8s\] tensorboard_url"):
        DeploymentPolicy.from_env({"TFK8S_TENSORBOARD_URL": template})


def test_setup_fills_what_it_knows_and_the_watch_the_pod_ip():
    s = spec(tensorboard=True)
    names = names_for(s)
    template = static_url("http://{pod_ip}:{port}/{namespace}/{job}/?p={pod}&h={host}&b={{x}}", names.job,
                          names.namespace, names.service, 6006)
    assert template == (f"http://{{pod_ip}}:6006/default/{names.job}/?p={names.job}-tensorboard"
                        f"&h=tensorboard.{names.service}.default.svc&b={{{{x}}}}")
    ready = TensorBoardState("Running", ready=True, pod_ip="10.213.0.9")
    assert tensorboard_url(template, ready) == (f"http://10.213.0.9:6006/default/{names.job}/"
                                                f"?p={names.job}-tensorboard&h=tensorboard.{names.service}"
                                                f".default.svc&b={{x}}")
    assert tensorboard_url("http://{pod_ip}:6006/", dataclasses.replace(ready, pod_ip="fd00::9")) == \
        "http://[fd00::9]:6006/"
    assert fill_url("http://{pod_ip}:{port}/", {"port": "1"}) == "http://{pod_ip}:1/"
    static = static_url("https://tb.example.com/{job}/", names.job, names.namespace, names.service, 6006)
    assert tensorboard_url(static, ready) == f"https://tb.example.com/{names.job}/"
    for not_yet in (None, TensorBoardState("Pending"), TensorBoardState("Running", ready=False, pod_ip="10.0.0.1"),
                    TensorBoardState("Running", ready=True), TensorBoardState("Failed", pod_ip="10.0.0.1")):
        assert tensorboard_url(template, not_yet) is None
    assert tensorboard_url(None, ready) is None and static_url("", names.job, "ns", "svc", 1) is None


def test_the_state_comes_from_the_named_pod_of_the_list():
    pods = [pod("ps", 0), tensorboard_pod(restarts=2)]
    assert tensorboard_state(pods, "job-tensorboard") == TensorBoardState("Running", True, "10.213.0.9", 2, None)
    assert tensorboard_state(pods, "other-tensorboard") is None and tensorboard_state(pods, None) is None
    assert tensorboard_state([tensorboard_pod(deleting=True)], "job-tensorboard").ready is False
    assert tensorboard_state([tensorboard_pod(waiting="CrashLoopBackOff", ready=False)],
                             "job-tensorboard").describe() == "Running (CrashLoopBackOff)"


def test_the_job_record_carries_the_tensorboard_and_reads_old_records():
    s = spec(tensorboard=True)
    names = names_for(s)
    rec = job_record(s, names, plan_replicas(s, names), policy=JobPolicy.from_spec(s, 600), has_shards=False,
                     kubernetes_conn_id="k", poll_interval=1.0, tensorboard_url="http://{pod_ip}:{port}/")
    assert (rec.tensorboard_pod, rec.tensorboard_port, rec.tensorboard_url) == (
        f"{names.job}-tensorboard", 6006, "http://{pod_ip}:6006/")
    assert JobRecord.from_xcom(rec.to_xcom()) == rec
    old = rec.to_xcom()
    for key in ("tensorboard_pod", "tensorboard_port", "tensorboard_url"):
        del old[key]
    assert JobRecord.from_xcom(old).tensorboard_pod is None
    plain = job_record(spec(), names_for(spec()), plan_replicas(spec(), names_for(spec())),
                       policy=JobPolicy.from_spec(spec(), 600), has_shards=False, kubernetes_conn_id="k",
                       poll_interval=1.0, tensorboard_url="http://{pod_ip}:{port}/")
    assert (plain.tensorboard_pod, plain.tensorboard_url) == (None, None)
