"""No job reads one of the package's own Secrets, whatever ``[tfk8s] allowed_secrets`` says.

A staging task's HDFS delegation token lives in a Secret labelled ``tfk8s.io/secret``
(:mod:`tfk8s_airflow.k8s.tokensecret`). Its name is unpredictable and reserved (``tfk8s-stage-*``), but a
name is not what makes it the package's: setup asks the real API server for the Secrets of the job's
namespace carrying the label and refuses a job whose pods would read one, under ``allowed_secrets = *``
too, before anything is created.
"""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from tfk8s_airflow.exceptions import SpecError
from tfk8s_airflow.job.builders.objects import JobNames
from tfk8s_airflow.job.builders.plan import plan_job
from tfk8s_airflow.job.policy import DeploymentPolicy, package_secret_problems
from tfk8s_airflow.job.spec import parse_spec
from tfk8s_airflow.k8s.client import JobClient
from tfk8s_airflow.operators.setup import refuse_package_secrets

IMAGE = "registry.example/tf:2"


def _plan(namespace: str, policy: DeploymentPolicy, secret: str) -> list[dict]:
    doc = {"name": "reads", "namespace": namespace, "image": IMAGE,
           "env": {"DB": {"value_from": {"secret_key_ref": {"name": secret, "key": "token"}}}},
           "worker": {"replicas": 1, "command": ["python", "train.py"]}}
    spec = parse_spec(doc, policy=policy)  # allowed_secrets = *: the spec's own admission lets it through
    return list(plan_job(spec, JobNames.for_run(spec, "r1", "train", "dag"), policy, dag_id="dag", run_id="r1").pods)


def test_the_pure_rule_refuses_a_labelled_secret_by_name_and_field():
    policy = DeploymentPolicy(allowed_secrets=("*",), default_namespace="jobs")
    pods = _plan("jobs", policy, "innocent")
    assert package_secret_problems(pods, frozenset()) == []
    assert package_secret_problems(pods, frozenset({"other"})) == []
    (problem,) = package_secret_problems(pods, frozenset({"innocent"}))
    assert "env[DB].valueFrom.secretKeyRef.name" in problem.field
    assert "Secret innocent carries the label tfk8s.io/secret" in problem.message
    assert "whatever [tfk8s] allowed_secrets says" in problem.message


@pytest.mark.k8s
def test_setup_refuses_a_secret_carrying_the_packages_label_under_allowed_secrets_star(k8s_cluster, k8s_namespace):
    """The Secret has an ordinary name (not ``tfk8s-stage-*``): only its label, read from the API server, makes
    it the package's. A Secret of the same namespace without the label is admitted."""
    core = k8s_cluster.core_v1
    labelled, plain = "innocent", "plain"
    core.create_namespaced_secret(k8s_namespace, {"metadata": {"name": labelled, "labels": {
        "tfk8s.io/secret": "hdfs-delegation", "app.kubernetes.io/managed-by": "tfk8s-airflow"}},
        "stringData": {"token": "x"}})
    core.create_namespaced_secret(k8s_namespace, {"metadata": {"name": plain}, "stringData": {"token": "y"}})
    policy = DeploymentPolicy(allowed_secrets=("*",), default_namespace=k8s_namespace)
    client = JobClient(core)
    assert client.package_secrets(k8s_namespace) == frozenset({labelled})

    with pytest.raises(SpecError) as refused:
        refuse_package_secrets(client, k8s_namespace, _plan(k8s_namespace, policy, labelled))
    message = str(refused.value)
    assert f"Secret {labelled} carries the label tfk8s.io/secret" in message
    assert "whatever [tfk8s] allowed_secrets says" in message and "secretKeyRef.name" in message
    refuse_package_secrets(client, k8s_namespace, _plan(k8s_namespace, policy, plain))  # no error
    assert core.list_namespaced_pod(k8s_namespace).items == []  # refused before anything was created


@pytest.mark.k8s
@pytest.mark.airflow
def test_the_setup_task_refuses_the_packages_secret_before_it_creates_anything(k8s_cluster, k8s_namespace,
                                                                                monkeypatch):
    """Setup as it runs (its own client, checks and creation; only its task context is a stand-in, as in
    tests/airflow/test_render_is_what_setup_creates.py) under ``allowed_secrets = *``: the job fails at once
    naming the Secret and its label, and no Service, ConfigMap or pod of it exists."""
    from airflow.sdk.exceptions import AirflowFailException

    from tfk8s_airflow.operators.setup import TFJobSetupOperator

    core = k8s_cluster.core_v1
    core.create_namespaced_secret(k8s_namespace, {"metadata": {"name": "innocent", "labels": {
        "tfk8s.io/secret": "hdfs-delegation"}}, "stringData": {"token": "x"}})
    monkeypatch.setenv("AIRFLOW__TFK8S__ALLOWED_SECRETS", "*")
    monkeypatch.setenv("AIRFLOW__TFK8S__DEFAULT_NAMESPACE", k8s_namespace)
    spec = {"name": "reads", "namespace": k8s_namespace, "image": IMAGE, "node_selector": {"type": "kwok"},
            "env": {"DB": {"value_from": {"secret_key_ref": {"name": "innocent", "key": "token"}}}}, "worker": 1}
    op = TFJobSetupOperator(task_id="train.setup", spec=spec, job_group="train", preflight="off")
    context = {"dag": SimpleNamespace(dag_id="tfk8s_t_package_secret", fileloc=None), "run_id": "r1",
               "ti": SimpleNamespace(xcom_push=lambda key, value: None)}
    with pytest.raises(AirflowFailException, match="Secret innocent carries the label tfk8s.io/secret"):
        op.execute(context)
    assert core.list_namespaced_pod(k8s_namespace).items == []
    assert core.list_namespaced_service(k8s_namespace).items == []
    assert [c.metadata.name for c in core.list_namespaced_config_map(k8s_namespace).items
            if c.metadata.name != "kube-root-ca.crt"] == []
