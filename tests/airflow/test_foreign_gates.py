"""A job whose pods another controller also gates: its gate stays, and the job waits for that admission.

The other controller is real: a MutatingAdmissionPolicy of the devstack's API server adds the
scheduling gate ``example.com/hold`` to every pod created in a namespace labelled
``tfk8s-test/hold=true`` (as Kueue's webhook adds ``kueue.x-k8s.io/admission``); only this module's
namespaces carry the label. KWOK pods, dag.test().

* Setup's release removes ``tfk8s.io/gang`` only: every pod keeps ``example.com/hold``, and with
  ``admission_timeout: 5s`` the job fails naming the gate, not ``startup_timeout``; teardown leaves
  nothing.
* The hold lifted by the "controller" (the test removes its gate): the job runs and succeeds.
"""
from __future__ import annotations

import time

import pytest
import yaml

from tests.airflow.test_recovery_kwok import in_background
from tests.airflow.test_tfjob_k8s import leftovers, run_dag
from tests.dagrun import states, xcom
from tests.fixtures.waiting import wait_until
from tests.podwatch import PodWatch

pytestmark = [pytest.mark.k8s, pytest.mark.airflow]

HOLD = "example.com/hold"
LABEL = "tfk8s-test/hold"
#: The policy's mutation (CEL): the pod's scheduling gates, with ``example.com/hold`` added.
ADD_HOLD = 'Object{spec: Object.spec{schedulingGates: [Object.spec.schedulingGates{name: "' + HOLD + '"}]}}'
POLICY = [
    {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy",
     "metadata": {"name": "tfk8s-test-hold"},
     "spec": {"matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                      "operations": ["CREATE"], "resources": ["pods"]}]},
              "failurePolicy": "Fail", "reinvocationPolicy": "Never",
              "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": ADD_HOLD}}]}},
    {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicyBinding",
     "metadata": {"name": "tfk8s-test-hold"},
     "spec": {"policyName": "tfk8s-test-hold",
              "matchResources": {"namespaceSelector": {"matchLabels": {LABEL: "true"}}}}},
]


@pytest.fixture(scope="module")
def hold_policy(k8s_cluster):
    docs = "\n---\n".join(yaml.safe_dump(d) for d in POLICY)
    k8s_cluster.kubectl_run("apply", "-f", "-", input=docs)
    yield
    k8s_cluster.kubectl_run("delete", "-f", "-", "--ignore-not-found", input=docs)


@pytest.fixture
def held_namespace(k8s_cluster, k8s_namespace, hold_policy):
    core = k8s_cluster.core_v1
    core.patch_namespace(k8s_namespace, {"metadata": {"labels": {LABEL: "true"}}})
    # The policy takes effect within a moment of being bound: wait until a probe pod gets the gate.
    probe = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe"},
             "spec": {"schedulingGates": [{"name": "probe"}], "containers": [{"name": "c", "image": "x"}]}}
    def gated() -> bool:
        created = core.create_namespaced_pod(k8s_namespace, probe)
        core.delete_namespaced_pod("probe", k8s_namespace, grace_period_seconds=0)
        return HOLD in [g.name for g in created.spec.scheduling_gates or []]

    wait_until(gated, 30, "the MutatingAdmissionPolicy gating a probe pod", 1)
    return k8s_namespace


def spec(namespace: str, **extra) -> dict:
    return {"name": "held", "namespace": namespace, "image": "tfk8s/trainer:0.1", "node_selector": {"type": "kwok"},
            "ps": 1, "worker": {"replicas": 2, "annotations": {"tfk8s.io/sim-duration": "3s",
                                                               "tfk8s.io/sim-exit-code": "0"}}, **extra}


def gates(pod) -> list[str]:
    return [g.name for g in pod.spec.scheduling_gates or []]


def test_another_controllers_gate_stays_and_admission_timeout_ends_the_wait(k8s_cluster, held_namespace,
                                                                             airflow_db):
    core = k8s_cluster.core_v1
    seen: dict[str, list[str]] = {}

    def record_gates():
        deadline = time.monotonic() + 60
        while len(seen) < 3 and time.monotonic() < deadline:
            for p in core.list_namespaced_pod(held_namespace, label_selector="tfk8s.io/job").items:
                # After setup's release (its gate is gone), what is left is the other controller's.
                if "tfk8s.io/gang" not in gates(p):
                    seen[p.metadata.name] = gates(p)
            time.sleep(0.2)
    join = in_background(record_gates)
    dr = run_dag("tfk8s_t_from_conf", held_namespace, spec=spec(held_namespace, admission_timeout="5s",
                                                                startup_timeout="2s"))
    join()
    assert len(seen) == 3 and all(g == [HOLD] for g in seen.values()), seen
    assert dr.state == "failed", states(dr)
    reason = xcom(dr, "train.wait", "summary")["reason"]
    assert f"is held by {HOLD}" in reason and "(admission_timeout 5s)" in reason, reason
    assert leftovers(core, held_namespace) == []


def test_once_the_other_controller_lifts_its_gate_the_job_runs(k8s_cluster, held_namespace, airflow_db):
    core = k8s_cluster.core_v1
    with PodWatch(core, held_namespace) as watch:
        def admit():
            deadline = time.monotonic() + 60
            lifted: set[str] = set()
            while len(lifted) < 3 and time.monotonic() < deadline:
                for p in core.list_namespaced_pod(held_namespace, label_selector="tfk8s.io/job").items:
                    if gates(p) == [HOLD] and p.metadata.name not in lifted:
                        core.patch_namespaced_pod(p.metadata.name, held_namespace, {"spec": {"schedulingGates": [
                            {"$patch": "delete", "name": HOLD}]}})
                        lifted.add(p.metadata.name)
                time.sleep(0.2)
            assert len(lifted) == 3, lifted
        join = in_background(admit)
        dr = run_dag("tfk8s_t_from_conf", held_namespace, spec=spec(held_namespace))
        join()
    assert dr.state == "success", states(dr)
    assert all(life.bound is not None for life in watch.lives.values())
    assert leftovers(core, held_namespace) == []
