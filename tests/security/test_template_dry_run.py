"""Pods with pod templates, and TFJob manifests' pods, as the real API server takes them (server-side dry run).

A pod template is Kubernetes' own pod spec, checked in full only by the API server: every pod
the examples' templates and TFJob manifests render is created with ``dryRun=All``
(validation and admission: the ServiceAccount and Priority plugins, nothing stored), and the
fields the templates add are read back from the server's answer. Setup makes the same dry run
before it creates anything, so a template the parser accepts and the server refuses fails the
job with the server's message before a single object exists.
"""
from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from tests.dagrun import states
from tfk8s_airflow.exceptions import SpecError
from tfk8s_airflow.job.builders.objects import JobNames
from tfk8s_airflow.job.builders.plan import plan_job
from tfk8s_airflow.job.policy import DeploymentPolicy
from tfk8s_airflow.job.spec import parse_spec
from tfk8s_airflow.k8s.client import JobClient

pytestmark = pytest.mark.k8s
ROOT = Path(__file__).resolve().parents[2]
#: The Secrets the examples read, allowed in the deployment's default namespace (each test's own).
SECRETS = ("db", "registry-creds")
EXAMPLES = [ROOT / "examples" / "pod-template.yaml", *sorted((ROOT / "examples").glob("tfjob-*.yaml"))]


def pods_of(doc, namespace):
    policy = DeploymentPolicy(allowed_secrets=SECRETS, default_namespace=namespace)
    spec = parse_spec({**doc, "namespace": namespace} if "kind" not in doc else
                               {**doc, "metadata": {**doc["metadata"], "namespace": namespace}}, policy=policy)
    return list(plan_job(spec, JobNames.for_run(spec, "dry"), policy).pods)


def dry_run(core, pod):
    return core.create_namespaced_pod(pod["metadata"]["namespace"], pod, dry_run="All")


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_every_template_pod_is_accepted_by_the_api_server(k8s_cluster, k8s_namespace, training_priority_class,
                                                          example):
    pods = pods_of(yaml.safe_load(example.read_text()), k8s_namespace)
    assert pods
    for pod in pods:
        dry_run(k8s_cluster.core_v1, pod)  # raises ApiException (422...) on any refusal


def test_the_server_keeps_what_the_template_adds(k8s_cluster, k8s_namespace, training_priority_class):
    pods = pods_of(yaml.safe_load((ROOT / "examples" / "pod-template.yaml").read_text()), k8s_namespace)
    worker = next(p for p in pods if p["metadata"]["labels"]["tfk8s.io/role"] == "worker")
    got = dry_run(k8s_cluster.core_v1, worker)
    assert got.spec.priority_class_name == training_priority_class and got.spec.priority == 1000  # admission ran
    assert [s.name for s in got.spec.image_pull_secrets] == ["registry-creds"]
    assert got.spec.security_context.run_as_user == 1000 and got.spec.security_context.fs_group == 1000
    assert got.spec.security_context.seccomp_profile.type == "RuntimeDefault"
    assert got.spec.affinity.pod_anti_affinity.preferred_during_scheduling_ignored_during_execution
    tf, shipper = got.spec.containers
    assert tf.name == "tensorflow" and tf.readiness_probe.tcp_socket.port == 2222
    assert shipper.name == "log-shipper" and shipper.security_context.allow_privilege_escalation is False
    vols = {v.name: v for v in got.spec.volumes}
    assert vols["scratch"].empty_dir.size_limit == "1Gi" and vols["db-creds"].secret.secret_name == "db"
    assert {m.mount_path for m in tf.volume_mounts} >= {"/scratch", "/etc/db"}


def _bad_template(namespace):
    doc = yaml.safe_load((ROOT / "examples" / "kwok-job.yaml").read_text())
    doc["namespace"] = namespace
    # The parser has no opinion on a sidecar's probe; the API server refuses a probe with no handler.
    doc["worker"] = {**doc["worker"], "pod_template": {"spec": {"containers": [
        {"name": "sidecar", "image": "busybox:1.36", "livenessProbe": {"periodSeconds": 5}}]}}}
    return doc


def test_a_template_the_server_refuses_is_named_by_the_dry_run_before_anything_exists(k8s_cluster, k8s_namespace):
    doc = _bad_template(k8s_namespace)
    spec = parse_spec(doc)  # the parser accepts it
    client = JobClient(k8s_cluster.core_v1)
    worker = next(p for p in plan_job(spec, JobNames.for_run(spec, "dry"), DeploymentPolicy()).pods
                  if p["metadata"]["labels"]["tfk8s.io/role"] == "worker")
    refusal = client.dry_run_pod(worker)
    assert refusal and "spec.containers[1].livenessProbe" in refusal, refusal
    assert k8s_cluster.core_v1.list_namespaced_pod(k8s_namespace).items == []


@pytest.mark.airflow
def test_setup_fails_permanently_on_the_servers_refusal_and_creates_nothing(k8s_cluster, k8s_namespace,
                                                                            airflow_db, capfd):
    from tests.airflow.test_tfjob_k8s import leftovers, run_dag

    dr = run_dag("tfk8s_t_from_conf", k8s_namespace, spec=_bad_template(k8s_namespace))
    st = states(dr)
    assert dr.state == "failed" and st[("train.setup", -1)] == "failed", st
    ti = next(t for t in dr.get_task_instances() if t.task_id == "train.setup")
    assert ti.try_number == 1  # a refusal is permanent: no retry
    out = "".join(capfd.readouterr())
    assert "worker.pod_template: the API server refuses the worker pods" in out
    assert "spec.containers[1].livenessProbe: Required value" in out
    assert leftovers(k8s_cluster.core_v1, k8s_namespace) == []


def test_a_roles_merged_template_is_what_the_server_sees(k8s_cluster, k8s_namespace, training_priority_class):
    doc = copy.deepcopy(yaml.safe_load((ROOT / "examples" / "pod-template.yaml").read_text()))
    doc["ps"] = {"replicas": 1, "pod_template": {"spec": {"priorityClassName": "no-such-class"}}}
    pods = pods_of(doc, k8s_namespace)
    ps = next(p for p in pods if p["metadata"]["labels"]["tfk8s.io/role"] == "ps")
    refusal = JobClient(k8s_cluster.core_v1).dry_run_pod(ps)
    assert refusal and "no-such-class" in refusal


def _worker_pod(doc, namespace, policy=None):
    spec = parse_spec(doc, policy=policy)
    return next(p for p in plan_job(spec, JobNames.for_run(spec, "dry"), policy or DeploymentPolicy()).pods
                if p["metadata"]["labels"]["tfk8s.io/role"] == "worker")


def test_a_misspelt_template_field_is_refused_not_dropped(k8s_cluster, k8s_namespace):
    # `resource` for `resources`: without strict field validation the server drops it with a warning nobody reads,
    # and the sidecar would run without its limits.
    doc = _bad_template(k8s_namespace)
    doc["worker"]["pod_template"] = {"spec": {"containers": [
        {"name": "sidecar", "image": "busybox:1.36", "resource": {"limits": {"memory": "64Mi"}}}]}}
    refusal = JobClient(k8s_cluster.core_v1).dry_run_pod(_worker_pod(doc, k8s_namespace))
    assert refusal and 'unknown field "spec.containers[1].resource"' in refusal, refusal
    assert k8s_cluster.core_v1.list_namespaced_pod(k8s_namespace).items == []


def test_template_label_values_written_as_numbers_reach_the_pods_as_text(k8s_cluster, k8s_namespace):
    doc = yaml.safe_load((ROOT / "examples" / "kwok-job.yaml").read_text())
    doc["namespace"] = k8s_namespace
    doc["pod_template"] = {"metadata": {"labels": {"version": 2, "canary": True},
                                        "annotations": {"example.com/replicas": 3}}}
    pod = _worker_pod(doc, k8s_namespace)
    assert pod["metadata"]["labels"]["version"] == "2" and pod["metadata"]["labels"]["canary"] == "true"
    assert pod["metadata"]["annotations"]["example.com/replicas"] == "3"
    assert JobClient(k8s_cluster.core_v1).dry_run_pod(pod) is None  # JSON numbers would be a 400 here


def test_a_sample_of_accepted_template_mutations_reaches_no_pod_the_strict_server_refuses(
        k8s_cluster, k8s_namespace, training_priority_class):
    """Validation checks the template fields tfk8s-airflow reads; the rest of a template is Kubernetes' own schema,
    and the API server's strict dry run, which setup makes before it creates anything, is its check. Over a sample
    of the fuzzer's single-point template mutations that validation accepts, setup's dry run refuses exactly what
    the strict server refuses, naming the field, and the sample holds both outcomes and unknown fields."""
    from kubernetes.client.exceptions import ApiException

    from tests.security.fuzz_shapes import GOOD_TEMPLATE, mutations

    tpl = copy.deepcopy(GOOD_TEMPLATE)
    tpl["spec"]["priorityClassName"] = training_priority_class
    policy = DeploymentPolicy(allowed_secrets=("*",), allowed_volume_types=("*",), allow_service_account_token=True,
                              default_namespace=k8s_namespace)
    base = {"name": "j", "namespace": k8s_namespace, "image": "img:1", "worker": 1, "pod_template": tpl}
    client = JobClient(k8s_cluster.core_v1)
    seen = {"accepted": 0, "refused": 0, "unknown field": 0}
    for i, doc in enumerate(mutations(base, ("pod_template", "spec"))):
        if i % 7:
            continue
        try:
            pod = _worker_pod(doc, k8s_namespace, policy)
        except SpecError:
            continue
        refusal = client.dry_run_pod(pod)
        try:
            k8s_cluster.core_v1.create_namespaced_pod(k8s_namespace, pod, dry_run="All", field_validation="Strict",
                                                      _preload_content=False)
            strict = None
        except ApiException as exc:
            strict = exc
        assert (refusal is None) == (strict is None), (doc, refusal, strict)
        if refusal is not None:
            # the field (or, from an admission plugin, the object it misses), in the server's words
            assert any(w in refusal for w in ("spec.", "metadata.", "PriorityClass")), refusal
            seen["unknown field"] += "unknown field" in refusal
        seen["accepted" if refusal is None else "refused"] += 1
    assert seen["accepted"] > 10 and seen["refused"] > 10 and seen["unknown field"] > 2, seen
    assert k8s_cluster.core_v1.list_namespaced_pod(k8s_namespace).items == []
