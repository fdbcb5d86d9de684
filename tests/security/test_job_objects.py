"""A job's own objects: its NetworkPolicy, and no adoption of a Service or ConfigMap setup did not create.

Real parts: Airflow's ``dag.test()`` of the setup task against the devstack's kube-apiserver and KWOK
nodes (the kube-controller-manager's garbage collector for "removed with the job").

What is not proven here: that the NetworkPolicy is *enforced*: the job's pods here are on KWOK nodes,
so the test asserts the object the API server stored; tests/realnode checks enforcement on the real
node (kube-router's firewall).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pendulum
import pytest

from tests.dagrun import states, xcom
from tests.fixtures.waiting import wait_until

pytestmark = [pytest.mark.k8s, pytest.mark.airflow, pytest.mark.timeout(600)]
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "dags"))


def _job_name(dr) -> str:
    return xcom(dr, "setup", key="job")["job"]


def _forget(dr) -> None:
    """Delete the run from Airflow's database, so that dag.test() can make the same run id again (a retry of
    the same run, as far as the job's names go)."""
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session

    with create_session() as session:
        for run in session.query(DagRun).filter_by(dag_id=dr.dag_id, run_id=dr.run_id).all():
            session.delete(run)


def test_setup_closes_the_jobs_network_and_the_policy_goes_with_the_job(k8s_cluster, k8s_namespace, airflow_db):
    import tfk8s_security_scenarios
    from kubernetes.client import NetworkingV1Api

    core, ns = k8s_cluster.core_v1, k8s_namespace
    net = NetworkingV1Api(core.api_client)
    dr = tfk8s_security_scenarios.setup_only.test(run_conf={"namespace": ns})
    assert dr.state == "success", states(dr)
    job = _job_name(dr)
    (policy,) = net.list_namespaced_network_policy(ns, label_selector=f"tfk8s.io/job={job}").items
    (svc,) = core.list_namespaced_service(ns, label_selector=f"tfk8s.io/job={job}").items
    assert [(r.kind, r.uid) for r in policy.metadata.owner_references] == [("Service", svc.metadata.uid)]
    spec = policy.spec
    assert spec.pod_selector.match_labels == {"tfk8s.io/job": job} and spec.policy_types == ["Ingress"]
    (rule,) = spec.ingress  # no TensorBoard in this job: one rule
    assert [p.pod_selector.match_labels for p in rule._from] == [{"tfk8s.io/job": job}]
    assert all(p.namespace_selector is None and p.ip_block is None for p in rule._from)
    assert [(p.port, p.protocol) for p in rule.ports] == [(2222, "TCP")]
    # Every pod of the job is selected by it (so nothing outside the job reaches their TF port).
    pods = core.list_namespaced_pod(ns, label_selector=f"tfk8s.io/job={job}").items
    assert pods and all(p.metadata.labels["tfk8s.io/job"] == job for p in pods)

    core.delete_namespaced_service(svc.metadata.name, ns)  # what teardown does first
    wait_until(lambda: not net.list_namespaced_network_policy(ns, label_selector=f"tfk8s.io/job={job}").items, 120,
             "the garbage collector to delete the job's NetworkPolicy", interval=1)


@pytest.mark.parametrize("kind", ["Service", "ConfigMap"])
def test_a_pre_created_service_or_shards_configmap_is_refused_naming_it(kind, k8s_cluster, k8s_namespace,
                                                                        airflow_db, capsys):
    import tfk8s_security_scenarios

    core, ns = k8s_cluster.core_v1, k8s_namespace
    # The names are those of the run dag.test() makes: found by a first run, then precreated for a second
    # of the same run id (a namespace writer computes them the same way from the DAG, run and group).
    when = pendulum.datetime(2026, 2, 1 if kind == "Service" else 2, tz="UTC")  # the same run id twice
    first = tfk8s_security_scenarios.setup_only.test(run_conf={"namespace": ns}, run_after=when)
    assert first.state == "success", states(first)
    job = _job_name(first)
    _forget(first)
    for svc in core.list_namespaced_service(ns, label_selector=f"tfk8s.io/job={job}").items:
        core.delete_namespaced_service(svc.metadata.name, ns)
    wait_until(lambda: not core.list_namespaced_config_map(ns, label_selector=f"tfk8s.io/job={job}").items
             and not core.list_namespaced_pod(ns, label_selector=f"tfk8s.io/job={job}").items, 120,
             "the first run's objects to go", interval=1)
    capsys.readouterr()
    if kind == "Service":  # recovery state in its annotation: relaunch with 1e15 bytes of memory
        planted = {"metadata": {"name": job, "labels": {"tfk8s.io/job": job}, "annotations": {
            "tfk8s.io/attempts": json.dumps({"attempts": [], "overrides": {"worker-0": {"memory": 1e15}}})}},
            "spec": {"clusterIP": "None", "selector": {"tfk8s.io/job": job}, "ports": [{"port": 2222}]}}
        core.create_namespaced_service(ns, planted)
        name = job
    else:  # every worker's input files
        name = f"{job}-shards"
        core.create_namespaced_config_map(ns, {"metadata": {"name": name, "labels": {"tfk8s.io/job": job}},
                                               "data": {"shards.json": json.dumps({"worker-0": ["/etc/shadow"]})}})
    dr = tfk8s_security_scenarios.setup_only.test(run_conf={"namespace": ns}, run_after=when)
    log = "".join(capsys.readouterr())
    assert states(dr)[("setup", -1)] == "failed"
    assert f"creating {kind} {ns}/{name}" in log and "setup never adopts an object it did not create" in log, \
        log[-3000:]
    assert core.list_namespaced_pod(ns, label_selector=f"tfk8s.io/job={job}").items == []
    # The planted object is left as it was: setup never deletes what it did not create.
    if kind == "Service":
        assert "tfk8s.io/attempts" in core.read_namespaced_service(name, ns).metadata.annotations
    else:
        assert "/etc/shadow" in core.read_namespaced_config_map(name, ns).data["shards.json"]


def test_setups_own_retry_takes_its_own_objects(k8s_cluster, k8s_namespace, airflow_db):
    """A setup whose worker died after creating the objects (no clean-up ran) is retried: same run, same
    objects, taken as its own."""
    import tfk8s_security_scenarios

    core, ns = k8s_cluster.core_v1, k8s_namespace
    when = pendulum.datetime(2026, 2, 3, tz="UTC")
    first = tfk8s_security_scenarios.setup_only.test(run_conf={"namespace": ns}, run_after=when)
    assert first.state == "success", states(first)
    job = _job_name(first)
    uid = core.list_namespaced_service(ns, label_selector=f"tfk8s.io/job={job}").items[0].metadata.uid
    run_id = first.run_id
    _forget(first)
    again = tfk8s_security_scenarios.setup_only.test(run_conf={"namespace": ns}, run_after=when)
    assert again.run_id == run_id and again.state == "success", states(again)
    (svc,) = core.list_namespaced_service(ns, label_selector=f"tfk8s.io/job={job}").items
    assert svc.metadata.uid == uid
