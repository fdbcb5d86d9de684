"""Kueue's topology-aware scheduling of a job's pod group (``topology:``), through a real Kueue.

Real parts: the devstack's kube-apiserver, scheduler and KWOK, and Kueue v0.19.2 (``devstack/up kueue``; its
TopologyAwareScheduling feature is on by default). Each test builds a cluster slice of its own: four KWOK nodes of
2 GPUs in two blocks (a node label ``tfk8s.io/test-block``), tainted for it; a Kueue Topology of two levels (the
block, then the host); a ResourceFlavor of those nodes with that topology; a ClusterQueue of 8 GPUs and a
LocalQueue in the test's namespace. Quota is never what limits a job here: 8 GPUs, 4 per block.
"""
from __future__ import annotations

import time
import uuid

import pytest

from tests.airflow.test_tfjob_k8s import run_dag
from tests.dagrun import states, xcom
from tests.fixtures.waiting import wait_until
from tests.kueue.test_kueue_admission import GROUP, VERSION, kueue, workloads  # noqa: F401 (fixture)
from tests.podwatch import PodWatch

pytestmark = [pytest.mark.k8s, pytest.mark.airflow]

BLOCK = "tfk8s.io/test-block"
TAINT = "tfk8s.io/tas-test"
OK = {"tfk8s.io/sim-duration": "3s", "tfk8s.io/sim-exit-code": "0"}


def _ready(node) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])


@pytest.fixture
def tas(k8s_cluster, k8s_namespace, kueue):  # noqa: F811 (the fixture imported above)
    """(tag, LocalQueue name, {node: block}): this test's nodes, Topology, flavor, ClusterQueue and LocalQueue."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    core, custom = k8s_cluster.core_v1, client.CustomObjectsApi(k8s_cluster.api_client)
    tag = uuid.uuid4().hex[:8]
    blocks = {f"tas-{tag}-{i}": f"b{i // 2}" for i in range(4)}
    for name, block in blocks.items():
        core.create_node({"apiVersion": "v1", "kind": "Node",
                          "metadata": {"name": name, "annotations": {"kwok.x-k8s.io/node": "fake"},
                                       "labels": {"tfk8s-tas": tag, BLOCK: block, "kubernetes.io/hostname": name}},
                          "spec": {"taints": [{"key": TAINT, "value": tag, "effect": "NoSchedule"}]},
                          "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "20", "nvidia.com/gpu": "2"},
                                     "capacity": {"cpu": "8", "memory": "32Gi", "pods": "20", "nvidia.com/gpu": "2"}}})
    wait_until(lambda: all(_ready(core.read_node(n)) for n in blocks), 60, "the test's KWOK nodes Ready", 0.5)
    name = f"tas-{tag}"
    opted_in = {"matchLabels": {kueue["TFK8S_KUEUE_OPT_IN_LABEL"]: "true"}}
    made = [("topologies", {"kind": "Topology", "metadata": {"name": name},
                            "spec": {"levels": [{"nodeLabel": BLOCK}, {"nodeLabel": "kubernetes.io/hostname"}]}}),
            ("resourceflavors", {"kind": "ResourceFlavor", "metadata": {"name": name},
                                 "spec": {"nodeLabels": {"tfk8s-tas": tag}, "topologyName": name}}),
            ("clusterqueues", {"kind": "ClusterQueue", "metadata": {"name": name},
                               "spec": {"namespaceSelector": opted_in,
                                        "resourceGroups": [{"coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                                                            "flavors": [{"name": name, "resources": [
                                                                {"name": "cpu", "nominalQuota": "32"},
                                                                {"name": "memory", "nominalQuota": "128Gi"},
                                                                {"name": "nvidia.com/gpu", "nominalQuota": "8"}]}]}]}})]
    for plural, body in made:
        custom.create_cluster_custom_object(GROUP, VERSION, plural, {"apiVersion": f"{GROUP}/{VERSION}", **body})
    core.patch_namespace(k8s_namespace, {"metadata": {"labels": {kueue["TFK8S_KUEUE_OPT_IN_LABEL"]: "true"}}})
    custom.create_namespaced_custom_object(GROUP, VERSION, k8s_namespace, "localqueues", {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "LocalQueue", "metadata": {"name": "lq"},
        "spec": {"clusterQueue": name}})

    def active():
        cq = custom.get_cluster_custom_object(GROUP, VERSION, "clusterqueues", name)
        return any(c["type"] == "Active" and c["status"] == "True" for c in cq.get("status", {}).get("conditions", []))
    wait_until(active, 60, f"ClusterQueue {name} Active", 0.5)
    yield tag, "lq", blocks
    for wl in workloads(custom, k8s_namespace):
        try:
            custom.delete_namespaced_custom_object(GROUP, VERSION, k8s_namespace, "workloads", wl)
        except ApiException as exc:
            if exc.status != 404:
                raise
    core.delete_collection_namespaced_pod(k8s_namespace, grace_period_seconds=0)
    wait_until(lambda: not workloads(custom, k8s_namespace) and not core.list_namespaced_pod(k8s_namespace).items,
               60, "the test's Workloads and pods deleted")
    custom.delete_namespaced_custom_object(GROUP, VERSION, k8s_namespace, "localqueues", "lq")
    for plural, body in reversed(made):
        custom.delete_cluster_custom_object(GROUP, VERSION, plural, body["metadata"]["name"])
    for node in blocks:
        core.delete_node(node)


def tas_spec(namespace: str, tag: str, workers: int, **extra) -> dict:
    return {"name": "tas", "namespace": namespace, "image": "tfk8s/trainer:0.1", "queue": "lq",
            "node_selector": {"tfk8s-tas": tag},
            "tolerations": [{"key": TAINT, "operator": "Equal", "value": tag, "effect": "NoSchedule"}],
            "resources": {"cpu": "100m", "memory": "64Mi"},
            "worker": {"replicas": workers, "annotations": OK,
                       "resources": {"cpu": "100m", "memory": "64Mi", "nvidia.com/gpu": 1}},
            **extra}


def test_a_job_with_a_required_block_has_all_its_pods_in_one_block(k8s_cluster, k8s_namespace, airflow_db, tas):
    tag, _, blocks = tas
    core = k8s_cluster.core_v1
    # Four one-GPU workers: one block's GPUs exactly. Spread over the four nodes (the scheduler's default for
    # equal nodes) they would span both blocks.
    doc = tas_spec(k8s_namespace, tag, 4, topology={"required": BLOCK})
    with PodWatch(core, k8s_namespace) as watch:
        dr = run_dag("tfk8s_t_from_conf", k8s_namespace, spec=doc)
    assert dr.state == "success", states(dr)
    lives = [life for life in watch.lives.values() if life.labels.get("tfk8s.io/role") == "worker"]
    assert len(lives) == 4
    assert all(life.pod.metadata.annotations.get("kueue.x-k8s.io/podset-required-topology") == BLOCK
               for life in lives)
    used = {life.pod.spec.node_name: blocks[life.pod.spec.node_name] for life in lives}
    assert len(set(used.values())) == 1, used  # one block
    assert len(used) == 2, used  # both of its nodes: 2 GPUs each


def test_a_job_no_block_can_hold_waits_with_kueues_reason_and_fails_at_admission_timeout(
        k8s_cluster, k8s_namespace, airflow_db, tas):
    tag, queue, _ = tas
    # Five GPUs: the ClusterQueue has 8, but no block has more than 4.
    doc = tas_spec(k8s_namespace, tag, 5, topology={"required": BLOCK}, admission_timeout="15s")
    t0 = time.monotonic()
    with PodWatch(k8s_cluster.core_v1, k8s_namespace) as watch:
        dr = run_dag("tfk8s_t_from_conf", k8s_namespace, spec=doc)
    assert dr.state == "failed", states(dr)
    assert all(life.bound is None for life in watch.lives.values()), "a pod of the job was bound"
    reason = xcom(dr, "train.wait", "summary")["reason"]
    assert "(admission_timeout 15s)" in reason and f"queued in {queue}" in reason, reason
    assert "topology" in reason.lower(), reason  # Kueue's own words: why no block takes it
    assert time.monotonic() - t0 < 120
