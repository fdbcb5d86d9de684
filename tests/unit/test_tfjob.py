"""Kubeflow TFJob manifests as specs: the mapping field by field, the refusals, TF_CONFIG, `tfk8s import`."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from tests.unit.test_cli import tfk8s
from tfk8s_airflow.exceptions import SpecError
from tfk8s_airflow.job.builders.objects import JobNames
from tfk8s_airflow.job.builders.plan import plan_job
from tfk8s_airflow.job.builders.render import parse_yaml, render_yaml
from tfk8s_airflow.job.defaults import FINISHED_POD_TTL_S as DEFAULT_FINISHED_POD_TTL
from tfk8s_airflow.job.policy import DeploymentPolicy
from tfk8s_airflow.job.spec import TFJobSpec, parse_spec, parse_spec_file
from tfk8s_airflow.job.spec import podtemplate as pt
from tfk8s_airflow.job.spec.tfjob import is_tfjob, to_native

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = sorted((ROOT / "examples").glob("tfjob-*.yaml"))
POLICY_ENV = {"TFK8S_ALLOWED_SECRETS": "db,registry-creds,ml-team/db,ml-team/registry-creds"}
POLICY = DeploymentPolicy.from_env(POLICY_ENV)


def container(**extra):
    return {"name": "tensorflow", "image": "registry.example.com/ml/tf:1", **extra}


def replica(replicas=1, policy=None, **pod):
    out = {"replicas": replicas, "template": {"spec": {"containers": [container()], **pod}}}
    if policy:
        out["restartPolicy"] = policy
    return out


def tfjob(replica_specs=None, **spec):
    return {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": "mnist", "namespace": "ml"},
            "spec": {"tfReplicaSpecs": replica_specs or {"PS": replica(1), "Worker": replica(2)}, **spec}}


def refused(doc) -> dict[str, str]:
    with pytest.raises(SpecError) as err:
        to_native(doc)
    return {p.field: str(p) for p in err.value.problems}


def tf_configs(spec: TFJobSpec) -> dict[str, dict]:
    names = JobNames.for_run(spec, "r1")
    out = {}
    for pod in plan_job(spec, names, POLICY).pods:
        env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
        key = f"{pod['metadata']['labels']['tfk8s.io/role']}-{pod['metadata']['labels']['tfk8s.io/index']}"
        out[key] = json.loads(env["TF_CONFIG"]) if "TF_CONFIG" in env else None
    return out


# ------------------------------------------------------------------------------ detection and the mapping
def test_a_tfjob_is_told_from_a_native_spec():
    assert is_tfjob(tfjob()) and not is_tfjob({"name": "mnist", "kind": "TFJob"})
    assert "apiVersion" in refused({**tfjob(), "apiVersion": "kubeflow.org/v1alpha1"})


def test_metadata_replicas_restart_policies_and_the_template_map_to_spec_keys():
    doc = tfjob({
        "ps": {"replicas": 2, "template": {"spec": {"containers": [  # replica types in any case
            container(ports=[{"name": "tfjob-port", "containerPort": 3333}])]}}},
        "WORKER": {"replicas": 3, "restartPolicy": "ExitCode", "template": {
            "metadata": {"labels": {"team": "ads"}, "annotations": {"a.example.com/x": "1"}, "creationTimestamp": None},
            "spec": {
                "containers": [container(
                    command=["python3", "train.py"], args=["--steps=10"], imagePullPolicy="Always",
                    env=[{"name": "A", "value": "1"},
                         {"name": "S", "valueFrom": {"secretKeyRef": {"name": "db", "key": "pw"}}},
                         {"name": "P", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}},
                         {"name": "L", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}}],
                    envFrom=[{"configMapRef": {"name": "cfg"}, "prefix": "CFG_"}],
                    resources={"requests": {"cpu": "1"}, "limits": {"cpu": "2"}},
                    ports=[{"name": "tfjob-port", "containerPort": 3333}, {"name": "metrics", "containerPort": 9090}],
                    volumeMounts=[{"name": "data", "mountPath": "/data"}]),
                    {"name": "sidecar", "image": "busybox"}],
                "nodeSelector": {"pool": "gpu"},
                "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60}],
                "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "d"}}],
                "affinity": {"podAntiAffinity": {}},
                "restartPolicy": "Never"}}},
    }, runPolicy={"activeDeadlineSeconds": 3600, "backoffLimit": 4, "cleanPodPolicy": "Running",
                  "ttlSecondsAfterFinished": 60,
                  "schedulingPolicy": {"minAvailable": 5, "priorityClass": "high", "scheduleTimeoutSeconds": 120}})
    conv = to_native(doc)
    native = conv.spec
    assert native["name"] == "mnist" and native["namespace"] == "ml"
    assert native["image"] == "registry.example.com/ml/tf:1"  # the same in every role: job-wide
    assert native["active_deadline"] == 3600 and native["max_restarts"] == 4 and native["schedule_timeout"] == 120
    assert native["port"] == 3333 and native["image_pull_policy"] == "Always"
    assert native["pod_template"] == {"spec": {"priorityClassName": "high"}}
    assert native["ps"] == {"replicas": 2, "restart_policy": "Never"}  # TFJob's default restartPolicy
    w = native["worker"]
    assert w["replicas"] == 3 and w["restart_policy"] == "ExitCode"
    assert w["command"] == ["python3", "train.py"] and w["args"] == ["--steps=10"]
    assert w["env"] == {"A": "1", "S": {"value_from": {"secret_key_ref": {"name": "db", "key": "pw"}}},
                        "P": {"value_from": {"field_ref": {"field_path": "metadata.name"}}}}
    assert w["env_from"] == [{"config_map_ref": {"name": "cfg"}, "prefix": "CFG_"}]
    assert w["resources"] == {"requests": {"cpu": "1"}, "limits": {"cpu": "2"}}
    assert w["node_selector"] == {"pool": "gpu"}
    assert w["tolerations"] == [{"key": "gpu", "operator": "Exists", "effect": "NoExecute", "toleration_seconds": 60}]
    assert w["pod_template"] == {
        "metadata": {"labels": {"team": "ads"}, "annotations": {"a.example.com/x": "1"}},
        "spec": {"containers": [
            {"name": "tensorflow",
             "env": [{"name": "L", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}}],
             "ports": [{"name": "metrics", "containerPort": 9090}],
             "volumeMounts": [{"name": "data", "mountPath": "/data"}]},
            {"name": "sidecar", "image": "busybox"}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "d"}}],
            "affinity": {"podAntiAffinity": {}}}}
    notes = "\n".join(conv.notes)
    for said in ("cleanPodPolicy Running", "finished pods for 60s", "backoffLimit 4", "restartPolicy is replaced"):
        assert said in notes
    assert native["clean_pod_policy"] == "Running" and native["finished_pod_ttl"] == 60
    spec = parse_spec(doc, policy=None)
    plan = plan_job(spec, JobNames.for_run(spec, "r"), DeploymentPolicy(allowed_secrets=("ml/db",)))
    pod = next(o for o in plan.pods if o["metadata"]["labels"]["tfk8s.io/role"] == "worker")
    assert pod["spec"]["priorityClassName"] == "high" and pod["spec"]["restartPolicy"] == "Never"  # ExitCode, as TFJob
    assert [c["name"] for c in pod["spec"]["containers"]] == ["tensorflow", "sidecar"]


@pytest.mark.parametrize("doc, path", [
    (tfjob({"Worker": replica(2, "Always")}), "spec.tfReplicaSpecs.Worker.restartPolicy"),
    (tfjob({"PS": replica(1, "Sometimes"), "Worker": replica(1)}), "spec.tfReplicaSpecs.PS.restartPolicy"),
    (tfjob({"Chief": replica(1), "Master": replica(1), "Worker": replica(1)}), "spec.tfReplicaSpecs.Master"),
    (tfjob({"Launcher": replica(1), "Worker": replica(1)}), "spec.tfReplicaSpecs.Launcher"),
    (tfjob({"Worker": {"replicas": 1, "template": {"spec": {"containers": [{"name": "main", "image": "x"}]}}}}),
     "spec.tfReplicaSpecs.Worker.template.spec.containers"),
    (tfjob(runPolicy={"cleanPodPolicy": "Sometimes"}), "spec.runPolicy.cleanPodPolicy"),
    (tfjob(runPolicy={"suspend": True}), "spec.runPolicy.suspend"),
    (tfjob(runPolicy={"managedBy": "kueue.x-k8s.io/multikueue"}), "spec.runPolicy.managedBy"),
    (tfjob(runPolicy={"schedulingPolicy": {"queue": "research"}}), "spec.runPolicy.schedulingPolicy.queue"),
    (tfjob(runPolicy={"schedulingPolicy": {"minAvailable": 2}}), "spec.runPolicy.schedulingPolicy.minAvailable"),
    (tfjob(runPolicy={"schedulingPolicy": {"minResources": {"cpu": "4"}}}),
     "spec.runPolicy.schedulingPolicy.minResources"),
    (tfjob(runPolicy={"backoffLimit": -1}), "spec.runPolicy.backoffLimit"),
    (tfjob(successPolicy="AnyWorker"), "spec.successPolicy"),
    (tfjob(enableDynamicWorker=True), "spec.enableDynamicWorker"),
    (tfjob(elasticPolicy={}), "spec.elasticPolicy"),
    (tfjob({"Worker": replica(1, activeDeadlineSeconds=60)}),
     "spec.tfReplicaSpecs.Worker.template.spec.activeDeadlineSeconds"),
    (tfjob({"PS": replica(1, serviceAccountName="a"), "Worker": replica(1, serviceAccountName="b")}),
     "spec.tfReplicaSpecs.*.template.spec.serviceAccountName"),
    ({**tfjob(), "metadata": {"namespace": "ml"}}, "metadata.name"),
    ({**tfjob(), "metadata": {"generateName": "-"}}, "metadata.generateName"),
    (tfjob(backoffLimit=-1), "spec.backoffLimit"),  # the older placement, named as written
    (tfjob(cleanPodPolicy="None", runPolicy={"cleanPodPolicy": "All"}), "spec.cleanPodPolicy"),
    ({**tfjob(), "apiVersion": "kubeflow.org/v1alpha1"}, "apiVersion"),
])
def test_what_cannot_be_honoured_is_refused_naming_the_tfjob_field(doc, path):
    assert path in refused(doc)


def test_a_field_the_native_spec_refuses_is_named_as_the_tfjob_wrote_it():
    doc = tfjob({"PS": replica(1), "Worker": replica(1, hostname="w")})
    doc["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["env"] = [
        {"name": "PW", "valueFrom": {"secretKeyRef": {"name": "db", "key": "pw"}}}]
    for rtype in ("PS", "Worker"):
        doc["spec"]["tfReplicaSpecs"][rtype]["template"]["spec"]["containers"][0]["image"] = "bad image"
    with pytest.raises(SpecError) as err:
        parse_spec(doc, policy=DeploymentPolicy())
    fields = set(err.value.fields)
    assert "spec.tfReplicaSpecs.Worker.template.spec.hostname" in fields  # not worker.pod_template.spec...
    assert "spec.tfReplicaSpecs.PS.template.spec.containers[tensorflow].image" in fields  # hoisted: the first type
    assert "tfk8s import" not in str(err.value)  # no pseudo-problem: every line is a field of the manifest
    assert all(f.startswith(("spec.", "metadata.")) for f in fields), fields
    # and the deployment's refusals too (the spec's own problems aside)
    doc["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"].pop("hostname")
    for rtype in ("PS", "Worker"):
        doc["spec"]["tfReplicaSpecs"][rtype]["template"]["spec"]["containers"][0]["image"] = "tf:1"
    with pytest.raises(SpecError) as err:
        parse_spec(doc, policy=DeploymentPolicy())
    assert list(err.value.fields) == ["spec.tfReplicaSpecs.Worker.template.spec.containers[tensorflow].env[PW]"
                                ".valueFrom.secretKeyRef.name"]
    assert "worker.env.PW.value_from.secret_key_ref.name" in str(err.value)  # the native key, for import users


def test_generate_name_names_the_job_and_each_run_gets_its_own_objects():
    doc = {**tfjob(), "metadata": {"generateName": "tfjob-", "namespace": "ml"}}
    conversion = to_native(doc)
    assert conversion.spec["name"] == "tfjob" and any("generateName" in n for n in conversion.notes)
    spec = parse_spec(doc)
    one, two = JobNames.for_run(spec, "run-1"), JobNames.for_run(spec, "run-2")
    assert one.service != two.service and one.service.startswith("tfjob")


def test_a_ps_may_restart_on_failure_as_under_tfjob():
    doc = tfjob({"PS": replica(1, "OnFailure"), "Worker": replica(2, "OnFailure")})
    conversion = to_native(doc)
    assert conversion.spec["ps"]["restart_policy"] == "OnFailure"
    assert any("lost every variable" in n for n in conversion.notes)
    spec = parse_spec(doc)
    pods = plan_job(spec, JobNames.for_run(spec, "r1"), POLICY).pods
    assert {(o["metadata"]["labels"]["tfk8s.io/role"], o["spec"]["restartPolicy"]) for o in pods} == {
        ("ps", "OnFailure"), ("worker", "OnFailure")}
    # a native spec's PS does not inherit the job-wide policy: it says its own
    native = parse_spec({"name": "j", "image": "tf:1", "restart_policy": "OnFailure", "ps": 1, "worker": 1})
    assert native.roles["ps"].restart_policy == "Never"


def test_the_older_run_policy_placement_is_read_as_run_policy():
    old = tfjob(cleanPodPolicy="All", backoffLimit=2, activeDeadlineSeconds=600, ttlSecondsAfterFinished=60)
    new = tfjob(runPolicy={"cleanPodPolicy": "All", "backoffLimit": 2, "activeDeadlineSeconds": 600,
                           "ttlSecondsAfterFinished": 60})
    assert to_native(old).spec == to_native(new).spec
    assert to_native(old).spec["max_restarts"] == 2 and to_native(old).spec["active_deadline"] == 600
    assert any("spec.cleanPodPolicy is read as spec.runPolicy.cleanPodPolicy" in n for n in to_native(old).notes)


def test_a_misplaced_key_is_told_where_it_belongs():
    doc = tfjob()
    doc["tfReplicaSpecs"] = doc["spec"].pop("tfReplicaSpecs")
    problems = refused(doc)
    assert "move it to spec.tfReplicaSpecs" in problems["tfReplicaSpecs"]
    inner = tfjob(runPolicy={"tfReplicaSpecs": {}})
    assert "move it to spec.tfReplicaSpecs" in refused(inner)["spec.runPolicy.tfReplicaSpecs"]


@pytest.mark.parametrize("version", ["kubeflow.org/v1beta2", "kubeflow.org/v1beta1", "kubeflow.org/v1alpha2"])
def test_older_versions_whose_fields_map_one_to_one_are_converted(version):
    old = {**tfjob(cleanPodPolicy="All", backoffLimit=1), "apiVersion": version}
    conversion = to_native(old)
    assert conversion.spec == to_native(tfjob(runPolicy={"cleanPodPolicy": "All", "backoffLimit": 1})).spec
    assert any(version in n for n in conversion.notes)


def test_a_version_that_does_not_map_is_refused_naming_it():
    v1alpha1 = {"apiVersion": "kubeflow.org/v1alpha1", "kind": "TFJob", "metadata": {"name": "old"},
                "spec": {"replicaSpecs": [{"replicas": 1, "tfReplicaType": "MASTER", "template": {}}]}}
    problems = refused(v1alpha1)
    assert "kubeflow.org/v1alpha1" in problems["apiVersion"] and "rewrite it as kubeflow.org/v1" in problems[
        "apiVersion"]


def test_success_policy_follows_tfjob():
    assert to_native(tfjob(successPolicy="AllWorkers")).spec["success_policy"] == "all_workers"
    with_chief = to_native(tfjob({"Chief": replica(1), "Worker": replica(2)}, successPolicy="AllWorkers"))
    assert "success_policy" not in with_chief.spec  # TFJob decides by the chief alone then
    assert any("chief alone" in n for n in with_chief.notes)
    assert "success_policy" not in to_native(tfjob(successPolicy="")).spec


@pytest.mark.parametrize("run, policy, ttl", [
    ({"cleanPodPolicy": "None"}, "None", DEFAULT_FINISHED_POD_TTL),
    ({"cleanPodPolicy": "None", "ttlSecondsAfterFinished": 30}, "None", 30),
    ({"cleanPodPolicy": "Running", "ttlSecondsAfterFinished": 0}, "Running", 0),
    ({"cleanPodPolicy": "All", "ttlSecondsAfterFinished": 30}, "All", DEFAULT_FINISHED_POD_TTL),
    ({}, "All", DEFAULT_FINISHED_POD_TTL),
])
def test_clean_pod_policy_and_ttl_map_to_the_spec(run, policy, ttl):
    conv = to_native(tfjob(runPolicy=run))
    spec = parse_spec(tfjob(runPolicy=run))
    assert (spec.clean_pod_policy, spec.finished_pod_ttl) == (policy, ttl)
    if policy != "All":
        assert any(f"cleanPodPolicy {policy}" in n and "deletes the running pods" in n for n in conv.notes)
    if "ttlSecondsAfterFinished" in run and policy == "All":
        assert any("no pod is kept" in n for n in conv.notes)


def test_the_older_clean_pod_policy_placement_maps_too():
    spec = parse_spec(tfjob(cleanPodPolicy="None", ttlSecondsAfterFinished=5))
    assert (spec.clean_pod_policy, spec.finished_pod_ttl) == ("None", 5)


def test_a_bad_ttl_names_the_tfjob_field():
    with pytest.raises(SpecError) as err:
        parse_spec(tfjob(runPolicy={"cleanPodPolicy": "None", "ttlSecondsAfterFinished": -1}))
    assert [p.field for p in err.value.problems] == ["spec.runPolicy.ttlSecondsAfterFinished"]


# ------------------------------------------------------------------------------ TF_CONFIG as TFJob writes it
def test_tf_config_is_tfjobs_format_master_included():
    spec = parse_spec(tfjob({"Master": replica(1), "Worker": replica(2), "PS": replica(1),
                                      "Evaluator": replica(1)}))
    names = JobNames.for_run(spec, "r1")
    svc, ns = names.service, "ml"
    cluster = {"evaluator": [f"evaluator-0.{svc}.{ns}.svc:2222"], "master": [f"chief-0.{svc}.{ns}.svc:2222"],
               "ps": [f"ps-0.{svc}.{ns}.svc:2222"],
               "worker": [f"worker-0.{svc}.{ns}.svc:2222", f"worker-1.{svc}.{ns}.svc:2222"]}
    configs = tf_configs(spec)
    assert configs["chief-0"] == {"cluster": cluster, "task": {"type": "master", "index": 0}, "environment": "cloud"}
    assert configs["worker-1"] == {"cluster": cluster, "task": {"type": "worker", "index": 1}, "environment": "cloud"}
    assert list(configs["ps-0"]["cluster"]) == ["evaluator", "master", "ps", "worker"]  # sorted, as Go's JSON
    pod = plan_job(spec, names, POLICY).pods[0]
    raw = next(e["value"] for e in pod["spec"]["containers"][0]["env"] if e["name"] == "TF_CONFIG")
    assert raw.startswith('{"cluster":{"evaluator":[') and raw.endswith('"environment":"cloud"}')  # compact


def test_a_one_replica_job_gets_no_tf_config_as_under_tfjob():
    spec = parse_spec(tfjob({"Worker": replica(1)}))
    assert spec.tf_wiring == "none" and tf_configs(spec) == {"worker-0": None}


# ------------------------------------------------------------------------------ the examples and tfk8s import
@pytest.mark.parametrize("path", MANIFESTS, ids=[p.stem for p in MANIFESTS])
def test_import_then_render_gives_the_pods_of_rendering_the_tfjob(tmp_path, path):
    imported = tfk8s("import", str(path), env=POLICY_ENV)
    assert imported.returncode == 0, imported.stderr
    assert not is_tfjob(yaml.safe_load(imported.stdout))
    native = tmp_path / "native.yaml"
    native.write_text(imported.stdout)
    direct = tfk8s("render", str(path), "--run-id", "r1", env=POLICY_ENV)
    again = tfk8s("render", str(native), "--run-id", "r1", env=POLICY_ENV)
    assert direct.returncode == 0 and again.returncode == 0, direct.stderr + again.stderr
    assert direct.stdout == again.stdout
    assert [d["kind"] for d in yaml.safe_load_all(direct.stdout)].count("Pod") >= 3
    spec = parse_spec_file(path)
    plan = plan_job(spec, JobNames.for_run(spec, "r1"), POLICY, run_id="r1")
    assert parse_yaml(direct.stdout) == plan.objects()  # tfk8s render prints the plan


def test_the_examples_are_the_jobs_they_say():
    dist = parse_spec_file(ROOT / "examples" / "tfjob-dist-mnist.yaml")
    assert dist.roles["worker"].restart_policy == "ExitCode" and dist.success_policy == "all_workers"
    assert dist.roles["ps"].restart_policy == "Never" and dist.max_restarts == 3
    tf2 = parse_spec_file(ROOT / "examples" / "tfjob-tf2-ps.yaml")
    assert tf2.success_policy == "default" and tf2.replicas("chief") == 1 and tf2.schedule_timeout == 600
    est = parse_spec_file(ROOT / "examples" / "tfjob-estimator.yaml")
    assert est.chief_name == "master" and est.replicas("evaluator") == 1 and est.roles["evaluator"].tracked
    assert "master" in tf_configs(est)["chief-0"]["cluster"]


def test_import_refuses_a_native_spec_and_names_tfjob_fields(tmp_path):
    res = tfk8s("import", str(ROOT / "examples" / "mnist.yaml"))
    assert res.returncode == 1 and "is not a TFJob manifest" in res.stderr
    bad = copy.deepcopy(tfjob({"Worker": replica(2, "Always")}))
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(bad))
    res = tfk8s("validate", str(path))
    assert res.returncode == 1 and "spec.tfReplicaSpecs.Worker.restartPolicy" in res.stderr


def test_import_prints_the_notes_as_comments():
    res = tfk8s("import", str(ROOT / "examples" / "tfjob-tf2-ps.yaml"), env=POLICY_ENV)
    assert "# note: spec.successPolicy AllWorkers" in res.stdout
    assert pt.thaw(yaml.safe_load(res.stdout))["chief"]["env"]["DB_PASSWORD"] == {
        "value_from": {"secret_key_ref": {"name": "db", "key": "password"}}}


def test_the_migration_guides_example_is_the_example_and_its_import():
    """docs/migration-tfjob.md shows examples/tfjob-dist-mnist.yaml and what tfk8s import prints for it."""
    import re

    blocks = re.findall(r"<!-- runnable: tfk8s validate -->\n```yaml\n(.*?)```", (ROOT / "docs" /
                        "migration-tfjob.md").read_text(), re.S)
    shown, imported = (yaml.safe_load(b) for b in blocks)
    assert shown == yaml.safe_load((ROOT / "examples" / "tfjob-dist-mnist.yaml").read_text())
    assert imported == to_native(shown).spec


def test_import_translates_even_what_the_deployments_policy_refuses(tmp_path):
    """The example reads the Secret db: refused by a deployment that allows no Secret, translated all the same."""
    path = ROOT / "examples" / "tfjob-tf2-ps.yaml"
    allowed = tfk8s("import", str(path), env=POLICY_ENV)
    res = tfk8s("import", str(path))  # the default policy: no Secret allowed
    assert res.returncode == 0 and res.stdout == allowed.stdout  # the same translation
    assert "policy would refuse" in res.stderr and "allowed_secrets" in res.stderr
    assert "spec.tfReplicaSpecs.Chief.template.spec.containers[tensorflow].env[DB_PASSWORD]" in res.stderr
    assert "policy would refuse" not in allowed.stderr
    assert tfk8s("validate", str(path)).returncode == 1  # validate still judges
    invalid = tmp_path / "invalid.yaml"
    invalid.write_text(yaml.safe_dump(tfjob({"Worker": replica(2, hostname="w")})))
    res = tfk8s("import", str(invalid))
    assert res.returncode == 1 and "hostname" in yaml.safe_load(res.stdout)["worker"]["pod_template"]["spec"]
    assert "spec.tfReplicaSpecs.Worker.template.spec.hostname" in res.stderr


def test_the_pods_carry_the_labels_programs_read_under_tfjob():
    spec = parse_spec(tfjob({"Master": replica(1), "PS": replica(1), "Worker": replica(2)}))
    pods = {(labels["tfk8s.io/role"], labels["tfk8s.io/index"]): labels
            for labels in (o["metadata"]["labels"] for o in plan_job(spec, JobNames.for_run(spec, "r1"), POLICY).pods)}
    kf = {k: {n: v for n, v in labels.items() if n.startswith("training.kubeflow.org/")} for k, labels in pods.items()}
    assert kf[("chief", "0")] == {"training.kubeflow.org/job-name": "mnist", "training.kubeflow.org/replica-type":
                                  "master", "training.kubeflow.org/replica-index": "0",
                                  "training.kubeflow.org/job-role": "master"}
    assert kf[("worker", "1")] == {"training.kubeflow.org/job-name": "mnist", "training.kubeflow.org/replica-type":
                                   "worker", "training.kubeflow.org/replica-index": "1"}
    assert all("training.kubeflow.org/operator-name" not in labels for labels in pods.values())
    no_chief = parse_spec(tfjob())  # worker 0 is the master role without a chief, as the operator decides
    roles = {(o["metadata"]["labels"]["tfk8s.io/role"], o["metadata"]["labels"]["tfk8s.io/index"]):
             o["metadata"]["labels"].get("training.kubeflow.org/job-role")
             for o in plan_job(no_chief, JobNames.for_run(no_chief, "r1"), POLICY).pods}
    assert {k: v for k, v in roles.items() if v} == {("worker", "0"): "master"}
    native = parse_spec({"name": "j", "image": "tf:1", "worker": 2})  # a native spec: only on request
    native_pods = plan_job(native, JobNames.for_run(native, "r"), POLICY).pods
    assert not any(n.startswith("training.kubeflow.org/") for o in native_pods for n in o["metadata"]["labels"])


def test_the_image_pull_policy_is_left_to_kubernetes_unless_set():
    """Kubernetes pulls an image tagged :latest (or untagged) Always, others IfNotPresent; TFJob leaves the field
    alone, and so does a spec that does not set it."""
    def policies(doc):
        spec = parse_spec(doc)
        names = JobNames.for_run(spec, "r1")
        plan = plan_job(spec, names, DeploymentPolicy())
        pods = plan.pods
        rendered = [o for o in parse_yaml(render_yaml(plan)) if o["kind"] == "Pod"]
        return ({c.get("imagePullPolicy") for p in pods for c in p["spec"]["containers"]},
                {c.get("imagePullPolicy") for p in rendered for c in p["spec"]["containers"]})
    assert policies(tfjob()) == ({None}, {None})
    assert policies({"name": "j", "image": "tf:latest", "worker": 2}) == ({None}, {None})
    assert policies({"name": "j", "image": "tf:1", "image_pull_policy": "Always", "worker": 2}) == (
        {"Always"}, {"Always"})
    pulled = tfjob({"Worker": replica(2)})
    pulled["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["imagePullPolicy"] = "Never"
    assert policies(pulled) == ({"Never"}, {"Never"})


def test_gang_hints_are_refused_or_said_never_silently_passed_on():
    gang = tfjob({"Worker": replica(2, schedulerName="scheduler-plugins-scheduler")})
    assert "PodGroup" in refused(gang)["spec.tfReplicaSpecs.Worker.template.spec.schedulerName"]
    volcano = tfjob({"Worker": replica(2, schedulerName="volcano")})
    assert "spec.tfReplicaSpecs.Worker.template.spec.schedulerName" in refused(volcano)
    hinted = tfjob({"Worker": replica(2)})
    hinted["spec"]["tfReplicaSpecs"]["Worker"]["template"]["metadata"] = {
        "annotations": {"scheduling.k8s.io/group-name": "g"}}
    notes = to_native(hinted).notes
    assert any("scheduling.k8s.io/group-name" in n and "tfk8s.io/gang" in n for n in notes)
    other = tfjob({"Worker": replica(2, schedulerName="my-scheduler")})  # another scheduler is the cluster's business
    assert to_native(other).spec["worker"]["pod_template"]["spec"]["schedulerName"] == "my-scheduler"
