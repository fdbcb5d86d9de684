"""The devstack's Kueue: it manages opted-in namespaces only, and KWOK ends deleted pods under its finalizer.

Real Kueue v0.19.2 (``devstack/up kueue``), the real API server and KWOK nodes. Other tests share the
devstack, so Kueue must intercept nobody else's pods, and the KWOK stage the component adds must touch
no pod but those Kueue holds by its finalizer.
"""
from __future__ import annotations

import uuid

import pytest

from tests.fixtures.waiting import wait_until
from tests.kueue.test_kueue_admission import GROUP, QUEUE, VERSION, kueue  # noqa: F401 - the fixture

pytestmark = [pytest.mark.k8s]

FINALIZER = "kueue.x-k8s.io/managed"


def group_pod(name: str, group: str, total: int) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": QUEUE,
                                                  "kueue.x-k8s.io/pod-group-name": group},
                         "annotations": {"kueue.x-k8s.io/pod-group-total-count": str(total)}},
            "spec": {"nodeSelector": {"type": "kwok"}, "restartPolicy": "Never",
                     "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}}


def test_kueue_manages_only_opted_in_namespaces_and_kwok_ends_its_deleted_pods(k8s_cluster, k8s_namespace,
                                                                              kueue):  # noqa: F811
    from kubernetes import client

    core = k8s_cluster.core_v1
    custom = client.CustomObjectsApi(k8s_cluster.api_client)
    # Not opted in: the queue label is ignored, no gate, no finalizer.
    plain = core.create_namespaced_pod(k8s_namespace, group_pod("plain", "g0", 1))
    assert not plain.spec.scheduling_gates and not plain.metadata.finalizers
    assert "kueue.x-k8s.io/managed" not in (plain.metadata.labels or {})
    wait_until(lambda: core.read_namespaced_pod("plain", k8s_namespace).status.phase == "Running", 30, "plain Running")
    core.delete_namespaced_pod("plain", k8s_namespace, grace_period_seconds=0)

    # Opted in, with a LocalQueue: Kueue labels, gates and finalizes the pods, and admits the group whole.
    core.patch_namespace(k8s_namespace, {"metadata": {"labels": {kueue["TFK8S_KUEUE_OPT_IN_LABEL"]: "true"}}})
    custom.create_namespaced_custom_object(GROUP, VERSION, k8s_namespace, "localqueues", {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "LocalQueue", "metadata": {"name": QUEUE},
        "spec": {"clusterQueue": kueue["TFK8S_KUEUE_CLUSTER_QUEUE"]}})
    group = f"g-{uuid.uuid4().hex[:6]}"
    made = [core.create_namespaced_pod(k8s_namespace, group_pod(f"{group}-{i}", group, 2)) for i in range(2)]
    assert all("kueue.x-k8s.io/admission" in [g.name for g in p.spec.scheduling_gates] for p in made)
    assert all(FINALIZER in p.metadata.finalizers and p.metadata.labels["kueue.x-k8s.io/managed"] == "true"
               for p in made)
    wait_until(lambda: all(core.read_namespaced_pod(p.metadata.name, k8s_namespace).status.phase == "Running"
                         for p in made), 30, "the group admitted and Running")

    # A deleted member that Kueue still holds gets a terminal phase from the component's KWOK stage.
    core.delete_namespaced_pod(made[0].metadata.name, k8s_namespace)
    held = wait_until(lambda: (p := core.read_namespaced_pod(made[0].metadata.name, k8s_namespace)).status.phase
                    == "Failed" and p, 30, "the deleted member Failed")
    assert held.metadata.deletion_timestamp is not None
    assert held.status.container_statuses[0].state.terminated.exit_code == 137
    # Its Workload deleted, Kueue stops the group and lets every pod go: nothing is left Terminating.
    custom.delete_namespaced_custom_object(GROUP, VERSION, k8s_namespace, "workloads", group)
    wait_until(lambda: not [p for p in core.list_namespaced_pod(k8s_namespace).items
                          if p.metadata.name.startswith(group)], 30, "every pod of the group gone")
