"""The job's objects (its plan): contract fields, golden YAML, and the Kubernetes 1.37 schema.

The golden files (tests/golden/<example>.yaml) are ``tfk8s render``'s output for each example with
shards; the templates ConfigMap's xz data is compared decoded (the pods it holds), not byte for
byte, since another liblzma may compress the same JSON to other bytes.
"""
import json
import os
from pathlib import Path

import kubernetes_validate
import pytest

from tfk8s_airflow.job.builders.objects import JobNames, plan_replicas
from tfk8s_airflow.job.builders.plan import plan_job
from tfk8s_airflow.job.builders.render import parse_yaml, render_yaml
from tfk8s_airflow.job.builders.templatemap import TEMPLATES_KEY
from tfk8s_airflow.job.policy import DeploymentPolicy
from tfk8s_airflow.job.run.resolve import as_spec_input, resolve_spec
from tfk8s_airflow.job.spec import parse_spec, parse_spec_file
from tfk8s_airflow.k8s.relaunch import read_templates

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
GOLDEN = ROOT / "tests" / "golden"
K8S_SCHEMA = "1.37.0"
SHARDS = {"worker-0": ["/data/part-0", "/data/part-2"], "worker-1": ["/data/part-1"]}
RUN, DAG = "scheduled__2026-11-29T00:00:00+00:00", "tfk8s_retrain_daily"
#: What the examples need of the deployment's policy (examples/full.yaml's ServiceAccount, the Secrets of
#: examples/secrets.yaml), as docs/spec.md states it; everything else is the default policy.
POLICY = DeploymentPolicy.from_env({"TFK8S_ALLOWED_SERVICE_ACCOUNTS": "tf-trainer", "TFK8S_ALLOWED_SECRETS":
                                    "db,registry-creds,ml-team/db,ml-team/registry-creds"})
XZ_SHOWN = "<xz-compressed JSON of the job's pods, compared decoded>"


def load(path):
    return parse_spec_file(path)


def names_for(spec):
    return JobNames.for_run(spec, RUN, dag_id=DAG)


def plan_of(spec, shards=None):
    # As on a cluster that serves the Workload API (the devstack's 1.37): examples/gang.yaml asks for it.
    return plan_job(spec, names_for(spec), POLICY, shards, dag_id=DAG, run_id=RUN, workload_api=True)


def objects_of(spec, shards=None):
    return plan_of(spec, shards).objects()


def by_kind(objs, kind):
    return [o for o in objs if o["kind"] == kind]


def test_pod_contract_fields():
    spec = parse_spec({"name": "mnist", "image": "tfk8s/trainer:0.1", "ps": 1, "worker": 2})
    names = names_for(spec)
    objs = objects_of(spec, SHARDS)
    pods = by_kind(objs, "Pod")
    assert [p["metadata"]["name"] for p in pods] == [f"{names.job}-ps-0", f"{names.job}-worker-0",
                                                     f"{names.job}-worker-1"]
    w1 = pods[2]
    assert w1["spec"]["hostname"] == "worker-1" and w1["spec"]["subdomain"] == names.service
    labels = w1["metadata"]["labels"]
    assert labels["tfk8s.io/job"] == names.job and labels["tfk8s.io/role"] == "worker"
    assert labels["tfk8s.io/index"] == "1" and labels["app.kubernetes.io/managed-by"] == "tfk8s-airflow"
    assert all(len(val) <= 63 for val in labels.values())
    c = w1["spec"]["containers"][0]
    assert c["name"] == "tensorflow" and c["ports"] == [{"name": "tfjob-port", "containerPort": 2222,
                                                         "protocol": "TCP"}]
    env = {e["name"]: e["value"] for e in c["env"]}
    tf_config = json.loads(env["TF_CONFIG"])
    assert tf_config["task"] == {"type": "worker", "index": 1}
    assert tf_config["cluster"]["ps"] == [f"ps-0.{names.service}.default.svc:2222"]
    assert env["TFK8S_SHARDS_FILE"] == "/etc/tfk8s/shards/shards.json"
    assert pods[0]["spec"]["restartPolicy"] == "Never" and w1["spec"]["restartPolicy"] == "OnFailure"
    assert pods[0]["metadata"]["labels"]["tfk8s.io/tracked"] == "false"
    svc = by_kind(objs, "Service")[0]
    assert svc["spec"]["clusterIP"] == "None" and svc["spec"]["publishNotReadyAddresses"] is True
    assert svc["spec"]["selector"] == {"tfk8s.io/job": names.job}
    cm = by_kind(objs, "ConfigMap")[0]
    assert json.loads(cm["data"]["shards.json"]) == SHARDS
    assert {"name": "tfk8s-shards", "configMap": {"name": names.configmap}} in w1["spec"]["volumes"]


def test_no_shard_configmap_without_shards_and_flags_wiring():
    spec = load(ROOT / "examples" / "legacy-flags.yaml")
    objs = objects_of(spec)
    assert [c["metadata"]["name"] for c in by_kind(objs, "ConfigMap")] == [f"{names_for(spec).job}-pods"]
    c = by_kind(objs, "Pod")[-1]["spec"]["containers"][0]
    assert "TF_CONFIG" not in {e["name"] for e in c["env"]}
    assert c["args"][-2:] == ["--job_name=worker", "--task_index=2"]
    env = {e["name"]: e["value"] for e in c["env"]}
    assert env["TFK8S_DATA_DIR"] == "/data" and env["TFK8S_LOGS_DIR"] == "/log"


def test_full_example_resources_deadline_code():
    spec = load(ROOT / "examples" / "full.yaml")
    pods = by_kind(objects_of(spec), "Pod")
    worker = next(p for p in pods if p["metadata"]["labels"]["tfk8s.io/role"] == "worker")
    res = worker["spec"]["containers"][0]["resources"]
    assert res["limits"]["nvidia.com/gpu"] == "1" and res["requests"]["cpu"] == "2"
    assert worker["spec"]["activeDeadlineSeconds"] == 7200
    assert worker["spec"]["initContainers"][0]["name"] == "fetch-code"
    assert "--sha256" in worker["spec"]["initContainers"][0]["args"]
    assert worker["spec"]["nodeSelector"] == {"accelerator": "a100"}
    chief = next(p for p in pods if p["metadata"]["labels"]["tfk8s.io/role"] == "chief")
    assert "nodeSelector" not in chief["spec"]


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.stem for e in EXAMPLES])
def test_every_object_passes_the_kubernetes_schema_strictly(example):
    spec = load(example)
    for obj in objects_of(spec, SHARDS):
        kubernetes_validate.validate(obj, K8S_SCHEMA, strict=True)


def test_schema_check_catches_a_broken_object():
    spec = load(EXAMPLES[0])
    pod = by_kind(objects_of(spec), "Pod")[0]
    pod["spec"]["containers"][0]["ports"][0]["containerPort"] = "2222"
    pod["spec"]["hostnme"] = "typo"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(pod, K8S_SCHEMA, strict=True)


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.stem for e in EXAMPLES])
def test_render_prints_exactly_the_plans_objects(example):
    spec = load(example)
    for shards in (None, SHARDS):
        plan = plan_of(spec, shards)
        assert parse_yaml(render_yaml(plan)) == plan.objects()


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.stem for e in EXAMPLES])
def test_golden_yaml(example):
    plan = plan_of(load(example), SHARDS)
    blob = plan.templates["binaryData"][TEMPLATES_KEY]
    assert read_templates(plan.templates["binaryData"], "the plan") == list(plan.pods)
    text = render_yaml(plan)
    assert text.count(blob) == 1
    text = text.replace(blob, XZ_SHOWN)
    golden = GOLDEN / f"{example.stem}.yaml"
    if os.environ.get("TFK8S_UPDATE_GOLDEN"):
        golden.write_text(text)
    assert golden.exists(), "run with TFK8S_UPDATE_GOLDEN=1 to create the golden file"
    assert text == golden.read_text()


def test_replica_plan_is_the_single_source():
    spec = parse_spec({"name": "x", "image": "i:1", "chief": 1, "ps": 1, "worker": 3, "evaluator": 1})
    plan = plan_replicas(spec, names_for(spec))
    assert [(r.role, r.index) for r in plan] == spec.replica_ids()
    assert len({r.pod_name for r in plan}) == len(plan)


def test_kubernetes_form_resources_render_requests_below_limits():
    spec = parse_spec({"name": "burst", "image": "i:1", "ps": {"replicas": 1, "resources": {"cpu": 1}},
                                "worker": {"replicas": 1, "resources": {"requests": {"cpu": "500m", "memory": "1Gi"},
                                                                        "limits": {"cpu": "2"}}}})
    plan = plan_of(spec)
    objs = plan.objects()
    ps, worker = (p["spec"]["containers"][0]["resources"] for p in by_kind(objs, "Pod"))
    assert ps == {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}
    assert worker == {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "2"}}
    assert parse_yaml(render_yaml(plan)) == objs
    for obj in objs:
        kubernetes_validate.validate(obj, K8S_SCHEMA, strict=True)


def test_env_from_secrets_renders_references_never_values():
    spec = load(ROOT / "examples" / "secrets.yaml")
    pods = by_kind(objects_of(spec), "Pod")
    worker = pods[1]["spec"]["containers"][0]
    env = {e["name"]: e for e in worker["env"]}
    assert env["DB_PASSWORD"] == {"name": "DB_PASSWORD",
                                  "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}}
    assert env["NODE"] == {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}
    assert worker["envFrom"] == [{"configMapRef": {"name": "trainer-config"}, "prefix": "CFG_"},
                                 {"secretRef": {"name": "db"}, "prefix": "DB_"}]
    volumes = {v["name"]: v for v in pods[1]["spec"]["volumes"]}
    assert volumes["creds"] == {"name": "creds", "secret": {"secretName": "registry-creds"}}
    assert volumes["scratch"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "1Gi"}
    assert "envFrom" in pods[0]["spec"]["containers"][0] and "NODE" not in {
        e["name"] for e in pods[0]["spec"]["containers"][0]["env"]}


@pytest.mark.parametrize("code,command", [
    ({"uri": "https://h/a.tgz", "entrypoint": "train.py"}, ["python3", "/opt/tfk8s/code/train.py"]),
    ({"uri": "https://h/a.tgz", "entrypoint": "bin/run.sh"}, ["sh", "/opt/tfk8s/code/bin/run.sh"]),
    ({"uri": "https://h/a.tgz", "entrypoint": "go", "mount_path": "/code/"}, ["sh", "/code/go"]),
])
def test_code_entrypoints_run_with_python3_or_sh(code, command):
    spec = parse_spec({"name": "c", "image": "i:1", "worker": 1, "code": code})
    pod = by_kind(objects_of(spec), "Pod")[0]
    assert pod["spec"]["containers"][0]["command"] == command
    own = parse_spec({"name": "c", "image": "i:1", "worker": 1, "code": code, "command": ["bash", "x"]})
    assert by_kind(objects_of(own), "Pod")[0]["spec"]["containers"][0]["command"] == ["bash", "x"]


def test_an_empty_command_runs_the_images_entrypoint_with_code_also_once_resolved():
    """``command: []`` wins over ``code``'s entrypoint, in the spec given and in the spec an operator
    stores and resolves again (``to_dict``, then ``parse_spec``)."""
    spec = parse_spec({"name": "c", "image": "i:1", "worker": 1, "code": {"uri": "https://h/a.tgz",
                                                                          "entrypoint": "train.py"}, "command": []})
    for each in (spec, resolve_spec(as_spec_input(spec))):
        assert by_kind(objects_of(each), "Pod")[0]["spec"]["containers"][0]["command"] == []
