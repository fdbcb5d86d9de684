"""Kubernetes-native specs through tf_job() on the devstack's KWOK nodes (dag.test()).

A spec with pod templates (affinity, a priority class, an image pull secret, security contexts,
a sidecar, emptyDir and Secret volumes) runs, its pods carrying every field; a template that
overrides a field of ours is refused before anything exists. The three TFJob manifests of
``examples/`` run unchanged in what a program sees: TF_CONFIG exactly in TFJob's format.

What the test changes in the manifests is what a KWOK node needs, and nothing a program
sees: pods select the fake nodes and carry KWOK's annotations (how long the simulated
program runs, its exit code), and a PersistentVolumeClaim becomes an emptyDir (there is no
storage behind KWOK). Pods are simulated by KWOK; the API server, admission, scheduler and
Airflow are real.
"""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from tests.airflow.test_tfjob_k8s import leftovers, run_dag
from tests.dagrun import states, xcom
from tests.podwatch import PodWatch

pytestmark = [pytest.mark.k8s, pytest.mark.airflow]
ROOT = Path(__file__).resolve().parents[2]
KWOK = {"type": "kwok"}


@pytest.fixture(autouse=True)
def allowed_secrets(monkeypatch, request):
    """The examples read the Secrets db and registry-creds, which the deployment allows ([tfk8s] allowed_secrets):
    plain names in its default namespace, here the test's own namespace."""
    monkeypatch.setenv("AIRFLOW__TFK8S__ALLOWED_SECRETS", "db,registry-creds,ml-team/db,ml-team/registry-creds")
    if "k8s_namespace" in request.fixturenames:
        monkeypatch.setenv("AIRFLOW__TFK8S__DEFAULT_NAMESPACE", request.getfixturevalue("k8s_namespace"))


def example(name: str) -> dict:
    return yaml.safe_load((ROOT / "examples" / name).read_text())


def pods_by_key(watch: PodWatch) -> dict:
    return {life.key: life.pod for life in watch.lives.values()}


def env_of(pod) -> dict:
    return {e.name: e.value for e in pod.spec.containers[0].env}


# ----------------------------------------------------------------------------- pod templates
def test_a_pod_template_job_runs_and_its_pods_carry_the_template(k8s_cluster, k8s_namespace, airflow_db,
                                                                 training_priority_class):
    spec = example("pod-template.yaml")
    spec.update(namespace=k8s_namespace, node_selector=KWOK)
    spec["worker"]["annotations"] = {"tfk8s.io/sim-duration": "3s"}
    with PodWatch(k8s_cluster.core_v1, k8s_namespace) as watch:
        dr = run_dag("tfk8s_t_from_conf", k8s_namespace, spec=spec)
    assert dr.state == "success", states(dr)
    summary = xcom(dr, "train.wait", "summary")
    assert summary["state"] == "succeeded"
    pods = pods_by_key(watch)
    assert set(pods) == {"ps-0", "worker-0", "worker-1"}
    for key, pod in pods.items():
        assert pod.spec.priority_class_name == training_priority_class and pod.spec.priority == 1000
        assert [s.name for s in pod.spec.image_pull_secrets] == ["registry-creds"]
        assert pod.spec.security_context.run_as_user == 1000 and pod.spec.security_context.run_as_non_root
        assert pod.spec.affinity.pod_anti_affinity is not None
        assert pod.metadata.labels["team"] == "ads" and pod.metadata.labels["tfk8s.io/role"] == key.split("-")[0]
    worker = pods["worker-0"]
    assert [c.name for c in worker.spec.containers] == ["tensorflow", "log-shipper"]
    shipper = worker.spec.containers[1]
    assert shipper.security_context.allow_privilege_escalation is False  # the deployment's defaults reach it
    assert shipper.security_context.capabilities.drop == ["ALL"]
    vols = {v.name: v for v in worker.spec.volumes}
    assert vols["scratch"].empty_dir is not None and vols["db-creds"].secret.secret_name == "db"
    tf = worker.spec.containers[0]
    assert tf.readiness_probe.tcp_socket.port == 2222 and "TF_CONFIG" in env_of(worker)
    assert worker.metadata.annotations["example.com/log-shipping"] == "on"
    assert [c.name for c in pods["ps-0"].spec.containers] == ["tensorflow"]  # the workers' template only
    assert summary["replicas"]["worker-1"]["phase"] == "Succeeded"
    assert leftovers(k8s_cluster.core_v1, k8s_namespace) == []


def test_a_template_overriding_our_field_is_refused_naming_it(k8s_cluster, k8s_namespace, airflow_db, capfd):
    spec = example("kwok-job.yaml")
    spec["namespace"] = k8s_namespace
    spec["worker"]["pod_template"] = {"spec": {"containers": [
        {"name": "tensorflow", "env": [{"name": "TF_CONFIG", "value": '{"cluster": {}}'}]}]}}
    capfd.readouterr()
    dr = run_dag("tfk8s_t_from_conf", k8s_namespace, spec=spec)
    st = states(dr)
    assert dr.state == "failed" and st[("train.setup", -1)] == "failed", st
    out = "".join(capfd.readouterr())
    assert "worker.pod_template.spec.containers[tensorflow].env[TF_CONFIG]: is set by tfk8s-airflow itself" in out
    assert leftovers(k8s_cluster.core_v1, k8s_namespace) == []


# ----------------------------------------------------------------------------- TFJob manifests
def for_kwok(manifest: dict, namespace: str, annotations: dict[str, dict[str, str]]) -> dict:
    """The manifest with its pods on the KWOK nodes (``annotations`` per replica type)."""
    doc = copy.deepcopy(manifest)
    doc["metadata"]["namespace"] = namespace
    for rtype, rspec in doc["spec"]["tfReplicaSpecs"].items():
        template = rspec.setdefault("template", {})
        meta = template.setdefault("metadata", {})
        meta["annotations"] = {**meta.get("annotations", {}), **annotations.get(rtype, {})}
        pod = template["spec"]
        pod["nodeSelector"] = KWOK
        for vol in pod.get("volumes", []):
            if "persistentVolumeClaim" in vol:
                del vol["persistentVolumeClaim"]
                vol["emptyDir"] = {}
    return doc


def expected_tf_config(manifest: dict, service: str, namespace: str, rtype: str, index: int) -> dict:
    """TF_CONFIG as Kubeflow's TFJob writes it: every replica type lowercased, its addresses in index
    order, the types sorted (Go's JSON encoder), the task, environment cloud. Only the host names are ours."""
    hosts = {"master": "chief"}
    cluster = {}
    for t, rspec in manifest["spec"]["tfReplicaSpecs"].items():
        role = t.lower()
        cluster[role] = [f"{hosts.get(role, role)}-{i}.{service}.{namespace}.svc:2222"
                         for i in range(rspec.get("replicas", 1))]
    return {"cluster": dict(sorted(cluster.items())), "task": {"type": rtype.lower(), "index": index},
            "environment": "cloud"}


def run_tfjob(k8s_cluster, namespace, name, annotations):
    manifest = example(name)
    with PodWatch(k8s_cluster.core_v1, namespace) as watch:
        dr = run_dag("tfk8s_t_from_conf", namespace, spec=for_kwok(manifest, namespace, annotations))
    pods = pods_by_key(watch)
    service = next(iter(pods.values())).spec.subdomain
    for key, pod in pods.items():
        role, index = key.rsplit("-", 1)
        rtype = next(t for t in manifest["spec"]["tfReplicaSpecs"]
                     if {"master": "chief"}.get(t.lower(), t.lower()) == role)
        raw = env_of(pod)["TF_CONFIG"]
        assert json.loads(raw) == expected_tf_config(manifest, service, namespace, rtype, int(index)), key
        assert list(json.loads(raw)) == ["cluster", "task", "environment"]
        assert pod.spec.containers[0].name == "tensorflow" and pod.spec.containers[0].ports[0].name == "tfjob-port"
    return dr, pods


def test_tfjob_tf1_ps_workers_with_exit_code_recreates_the_pod(k8s_cluster, k8s_namespace, airflow_db):
    """TF1 PS/workers, ExitCode as TFJob does it: the pods are Never; a worker killed (exit 137) on the first
    attempt gets a new pod, which runs to the end, and the job succeeds when every worker has (AllWorkers)."""
    dr, pods = run_tfjob(k8s_cluster, k8s_namespace, "tfjob-dist-mnist.yaml", {
        "Worker": {"tfk8s.io/sim-duration": "6s", "tfk8s.io/sim-fault": "oom", "tfk8s.io/sim-fault-after": "1s"}})
    assert dr.state == "success", states(dr)
    summary = xcom(dr, "train.wait", "summary")
    assert summary["state"] == "succeeded"
    for key in ("worker-0", "worker-1"):
        assert summary["replicas"][key]["phase"] == "Succeeded" and summary["replicas"][key]["restarts"] == 0
    assert sorted(k for a in summary["attempts"] for k in a["replicas"]) == ["worker-0", "worker-1"]
    assert all(a["action"] == "replace" and "ExitCode recreates the pod" in a["reason"] for a in summary["attempts"])
    assert pods["worker-0"].spec.restart_policy == "Never" and pods["ps-0"].spec.restart_policy == "Never"
    assert pods["worker-0"].metadata.annotations["example.com/team"] == "vision"
    assert pods["worker-0"].spec.active_deadline_seconds == 7200
    assert leftovers(k8s_cluster.core_v1, k8s_namespace) == []


def test_tfjob_exit_code_permanent_fails_the_job_and_the_program_ran_once(k8s_cluster, k8s_namespace, airflow_db):
    """ExitCode, exit 1: permanent under TFJob. The pod is Never, so the kubelet never runs it again, and the
    job fails at once, naming the code, with no recreation."""
    dr, pods = run_tfjob(k8s_cluster, k8s_namespace, "tfjob-dist-mnist.yaml", {
        "Worker": {"tfk8s.io/sim-duration": "1s", "tfk8s.io/sim-exit-code": "1"}})
    assert dr.state == "failed", states(dr)
    summary = xcom(dr, "train.wait", "summary")
    assert summary["state"] == "failed" and "1-127 are permanent" in summary["reason"], summary["reason"]
    assert summary["attempts"] == [] and summary["failure_class"] == "code"
    assert all(summary["replicas"][k]["restarts"] == 0 for k in ("worker-0", "worker-1") if k in summary["replicas"])
    assert leftovers(k8s_cluster.core_v1, k8s_namespace) == []


def test_tfjob_tf2_ps_strategy_chief_decides(k8s_cluster, k8s_namespace, airflow_db):
    """TF2 ParameterServerStrategy: the chief's success ends the job while workers and PS still serve,
    as under TFJob (which decides by the chief whatever successPolicy says)."""
    dr, pods = run_tfjob(k8s_cluster, k8s_namespace, "tfjob-tf2-ps.yaml", {"Chief": {"tfk8s.io/sim-duration": "3s"}})
    assert dr.state == "success", states(dr)
    summary = xcom(dr, "train.wait", "summary")
    assert summary["replicas"]["chief-0"]["phase"] == "Succeeded"
    assert summary["replicas"]["worker-1"]["phase"] == "Running" and summary["replicas"]["ps-1"]["phase"] == "Running"
    chief_env = {e.name: e for e in pods["chief-0"].spec.containers[0].env}
    assert chief_env["DB_PASSWORD"].value_from.secret_key_ref.name == "db"
    assert pods["chief-0"].metadata.labels["team"] == "ads"
    assert xcom(dr, "train.teardown")["deleted"]["pods"] == 5
    assert leftovers(k8s_cluster.core_v1, k8s_namespace) == []


def test_tfjob_estimator_master_and_evaluator(k8s_cluster, k8s_namespace, airflow_db):
    """A Master (TF_CONFIG's "master"), PS, workers and an evaluator that outlives the master: the job waits for
    its final evaluation, then teardown removes everything (cleanPodPolicy All)."""
    dr, pods = run_tfjob(k8s_cluster, k8s_namespace, "tfjob-estimator.yaml", {
        "Master": {"tfk8s.io/sim-duration": "2s"}, "Worker": {"tfk8s.io/sim-duration": "2s"},
        "Evaluator": {"tfk8s.io/sim-duration": "6s"}})
    assert dr.state == "success", states(dr)
    summary = xcom(dr, "train.wait", "summary")
    assert summary["replicas"]["evaluator-0"]["phase"] == "Succeeded"
    assert summary["replicas"]["chief-0"]["phase"] == "Succeeded"
    assert json.loads(env_of(pods["chief-0"])["TF_CONFIG"])["task"] == {"type": "master", "index": 0}
    assert leftovers(k8s_cluster.core_v1, k8s_namespace) == []
