"""Setup and recovery release the job's own scheduling gate and no other (a real API server).

The cluster is shared: another controller's gate on a job's pod (Kueue's admission gate, a policy's
hold) must survive the release that starts the job. The pods here are created with two gates, the
job's ``tfk8s.io/gang`` and ``example.com/hold``, as a mutating webhook would have left them (no
webhook of another controller runs on the devstack by default); the release is setup's own
``JobClient.release_gates``. Removing ``/spec/schedulingGates`` as a whole, as the release did
before, strips both.
"""
from __future__ import annotations

import pytest

from tfk8s_airflow.contract import GANG_GATE
from tfk8s_airflow.k8s.client import JobClient

pytestmark = [pytest.mark.k8s]

HOLD = "example.com/hold"


def pod(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"tfk8s.io/job": "gates"}},
            "spec": {"schedulingGates": [{"name": GANG_GATE}, {"name": HOLD}],
                     "nodeSelector": {"type": "kwok"},
                     "containers": [{"name": "tensorflow", "image": "tfk8s/trainer:0.1"}]}}


def gates(core, namespace: str, name: str) -> list[str]:
    return [g.name for g in core.read_namespaced_pod(name, namespace).spec.scheduling_gates or []]


def test_the_release_removes_only_the_jobs_gate_and_again_is_harmless(k8s_cluster, k8s_namespace):
    core = k8s_cluster.core_v1
    names = [f"gates-{i}" for i in range(3)]
    for name in names:
        core.create_namespaced_pod(k8s_namespace, pod(name))
    client = JobClient(core)
    client.release_gates(k8s_namespace, names)
    assert {name: gates(core, k8s_namespace, name) for name in names} == {name: [HOLD] for name in names}
    client.release_gates(k8s_namespace, names)  # a retried setup: idempotent
    assert all(gates(core, k8s_namespace, name) == [HOLD] for name in names)
    phases = {p.metadata.name: p.status.phase for p in core.list_namespaced_pod(k8s_namespace).items}
    assert set(phases.values()) == {"Pending"}, phases  # still held by the other gate: not scheduled
