"""A job whose teardown never runs: deleting its Service removes everything, by Kubernetes itself.

Setup runs for real (``dag.test()`` of a DAG holding only the setup task, so no teardown
ever runs) against the devstack API server; the parameter server and the workers are KWOK
pods that never exit. The devstack runs the real kube-controller-manager, whose garbage
collector deletes the dependents of a deleted owner: once the Service is deleted, the pods
and ConfigMaps must go without anyone deleting them.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.dagrun import states
from tests.fixtures.waiting import wait_until

pytestmark = [pytest.mark.k8s, pytest.mark.airflow]
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "dags"))


def test_deleting_the_service_removes_the_whole_job(k8s_cluster, k8s_namespace, airflow_db):
    core, ns = k8s_cluster.core_v1, k8s_namespace
    import tfk8s_security_scenarios

    dr = tfk8s_security_scenarios.setup_only.test(run_conf={"namespace": ns})
    assert dr.state == "success", states(dr)
    (svc,) = core.list_namespaced_service(ns, label_selector="tfk8s.io/job").items
    job = svc.metadata.labels["tfk8s.io/job"]
    pods = core.list_namespaced_pod(ns, label_selector=f"tfk8s.io/job={job}").items
    cms = core.list_namespaced_config_map(ns, label_selector=f"tfk8s.io/job={job}").items
    assert len(pods) == 3 and {c.metadata.name for c in cms} == {f"{job}-shards", f"{job}-pods"}
    for obj in pods + cms:
        refs = obj.metadata.owner_references or []
        assert [(r.kind, r.name, r.uid) for r in refs] == [("Service", svc.metadata.name, svc.metadata.uid)], \
            obj.metadata.name
    wait_until(lambda: all(p.status.phase == "Running" for p in core.list_namespaced_pod(
        ns, label_selector=f"tfk8s.io/job={job}").items), 60, "the job's pods Running")

    core.delete_namespaced_service(svc.metadata.name, ns)  # what teardown never did

    def gone() -> bool:
        return not (core.list_namespaced_pod(ns, label_selector=f"tfk8s.io/job={job}").items
                    or core.list_namespaced_config_map(ns, label_selector=f"tfk8s.io/job={job}").items)

    wait_until(gone, 120, f"the garbage collector to delete the pods and ConfigMaps of {job}", interval=1)
