"""The pre-flight verdict against the real API server, on KWOK nodes of this test's own.

Each test makes two KWOK nodes of 4 GPUs with a label and a taint of its own: only its job's
pods select and tolerate them, so no other test's pods land there, and the verdict it gets
counts only nodes its job could use, whatever other nodes the shared cluster has.
"""
from __future__ import annotations

import threading
import time
import uuid

import pytest

from tests.airflow.test_tfjob_k8s import leftovers, run_dag
from tests.dagrun import states, xcom
from tests.fixtures.waiting import wait_until
from tests.podwatch import PodWatch

pytestmark = [pytest.mark.k8s, pytest.mark.airflow]

TAINT_KEY = "tfk8s.io/preflight-test"
OK = {"tfk8s.io/sim-duration": "2s", "tfk8s.io/sim-exit-code": "0"}


def _ready(node) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])


@pytest.fixture()
def gpu_nodes(k8s_cluster):
    """Two KWOK nodes of 4 nvidia.com/gpu each, labelled ``tfk8s-pf=<tag>`` and tainted ``<TAINT_KEY>=<tag>``."""
    core = k8s_cluster.core_v1
    tag = uuid.uuid4().hex[:8]
    names = [f"pf-{tag}-{i}" for i in range(2)]
    for name in names:
        core.create_node({"apiVersion": "v1", "kind": "Node",
                          "metadata": {"name": name, "annotations": {"kwok.x-k8s.io/node": "fake"},
                                       "labels": {"tfk8s-pf": tag, "kubernetes.io/hostname": name}},
                          "spec": {"taints": [{"key": TAINT_KEY, "value": tag, "effect": "NoSchedule"}]},
                          "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "20", "nvidia.com/gpu": "4"},
                                     "capacity": {"cpu": "8", "memory": "32Gi", "pods": "20", "nvidia.com/gpu": "4"}}})
    deadline = time.monotonic() + 60
    while any(not _ready(core.read_node(n)) for n in names):
        assert time.monotonic() < deadline, "KWOK did not make the test's nodes Ready"
        time.sleep(0.5)
    yield tag, names
    for name in names:
        core.delete_node(name)


def job_spec(namespace: str, tag: str, *, gpus: int, workers: int = 2, tolerate: bool = True,
             selector: dict | None = None, **extra) -> dict:
    doc = {"name": "pf", "namespace": namespace, "image": "tfk8s/trainer:0.1",
           "node_selector": selector if selector is not None else {"tfk8s-pf": tag},
           "worker": {"replicas": workers, "annotations": OK,
                      "resources": {"cpu": "100m", "memory": "64Mi", "nvidia.com/gpu": gpus}},
           **extra}
    if tolerate:
        doc["tolerations"] = [{"key": TAINT_KEY, "operator": "Equal", "value": tag, "effect": "NoSchedule"}]
    return doc


def run_refused(k8s_cluster, namespace, doc):
    core = k8s_cluster.core_v1
    with PodWatch(core, namespace) as watch:
        dr = run_dag("tfk8s_t_from_conf", namespace, spec=doc)
    st = states(dr)
    assert dr.state == "failed" and st[("train.setup", -1)] == "failed", st
    assert watch.lives == {}, "a pod was created"  # not even gated: nothing was created
    assert leftovers(core, namespace) == []
    record = xcom(dr, "train.setup", "preflight")
    assert record["verdict"] == "never" and record["mode"] == "enforce", record
    return record


def test_eight_gpus_per_worker_on_nodes_of_four_never_fits(k8s_cluster, k8s_namespace, airflow_db, gpu_nodes):
    tag, _ = gpu_nodes
    record = run_refused(k8s_cluster, k8s_namespace, job_spec(k8s_namespace, tag, gpus=8))
    assert "no node has 8 nvidia.com/gpu" in record["reason"] and "the largest has 4" in record["reason"]
    assert record["nodes"] == 2 and record["pods"] == 2
    print(f"never after {record['seconds']:.3f}s (two LISTs and the packing)")
    assert record["waited_s"] < 1 and record["seconds"] < 1


def test_a_node_selector_nothing_matches_never_fits_naming_it(k8s_cluster, k8s_namespace, airflow_db, gpu_nodes):
    tag, _ = gpu_nodes
    record = run_refused(k8s_cluster, k8s_namespace,
                         job_spec(k8s_namespace, tag, gpus=1, selector={"tfk8s-pf": f"{tag}-none"}))
    assert f"node selector tfk8s-pf={tag}-none" in record["reason"], record


def test_an_untolerated_taint_never_fits_naming_it(k8s_cluster, k8s_namespace, airflow_db, gpu_nodes):
    tag, _ = gpu_nodes
    record = run_refused(k8s_cluster, k8s_namespace, job_spec(k8s_namespace, tag, gpus=1, tolerate=False))
    assert f"{TAINT_KEY}={tag}:NoSchedule (on 2 node(s))" in record["reason"], record


def seen_waiting(monkeypatch) -> threading.Event:
    """Set when setup's pre-flight first reaches ``waits`` (the real verdict, observed, not replaced)."""
    from tfk8s_airflow.job.policy.preflight import WAITS
    from tfk8s_airflow.k8s import capacity

    event = threading.Event()
    real = capacity.judge

    def observed(*args, **kwargs):
        verdict = real(*args, **kwargs)
        if verdict.verdict == WAITS:
            event.set()
        return verdict

    monkeypatch.setattr(capacity, "judge", observed)
    return event


def occupy_gpus(core, namespace, nodes, gpus=3):
    """Another job's pods holding ``gpus`` of each node's GPUs; bound before this returns."""
    for i, node in enumerate(nodes):
        core.create_namespaced_pod(namespace, {
            "metadata": {"name": f"other-{i}", "labels": {"app": "other"}},
            "spec": {"nodeSelector": {"kubernetes.io/hostname": node},
                     "tolerations": [{"key": TAINT_KEY, "operator": "Exists"}],
                     "containers": [{"name": "c", "image": "busybox",
                                     "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}})
    wait_until(lambda: all(p.spec.node_name
                           for p in core.list_namespaced_pod(namespace, label_selector="app=other").items),
               60, "the other job's pods bound", 0.3)


def test_fits_the_quota_but_not_the_free_gpus_waits_then_runs_when_the_other_pods_go(
        k8s_cluster, k8s_namespace, airflow_db, gpu_nodes, monkeypatch):
    from tfk8s_airflow.job.builders.objects import JobNames, plan_replicas, pod_manifest
    from tfk8s_airflow.job.policy.preflight import WAITS, bound_usage, judge, node_from_api, pod_demand
    from tfk8s_airflow.job.spec import parse_spec
    from tfk8s_airflow.k8s.capacity import read_cluster
    from tfk8s_airflow.k8s.client import JobClient

    core = k8s_cluster.core_v1
    tag, names = gpu_nodes
    core.create_namespaced_resource_quota(k8s_namespace, {
        "metadata": {"name": "team-quota"}, "spec": {"hard": {"requests.nvidia.com/gpu": "16", "pods": "20"}}})
    occupy_gpus(core, k8s_namespace, names)  # 3 of the 4 GPUs of each node
    doc = job_spec(k8s_namespace, tag, gpus=4, schedule_timeout="2m")

    # The verdict setup will reach, for the pods it will create.
    spec = parse_spec(doc)
    jn = JobNames.for_run(spec, "manual", dag_id="d")
    nodes, bound = read_cluster(JobClient(core))
    verdict = judge([node_from_api(n) for n in nodes], bound_usage(bound),
                    [pod_demand(pod_manifest(spec, jn, r)) for r in plan_replicas(spec, jn)])
    assert verdict.verdict == WAITS and "needs 8 nvidia.com/gpu, 2 free" in verdict.reason, verdict

    released: list[float] = []
    waiting = seen_waiting(monkeypatch)

    def release_when_waiting():
        if waiting.wait(180):  # setup's own verdict said waits (and it polls again every second)
            time.sleep(2)
            released.append(time.monotonic())
            core.delete_collection_namespaced_pod(k8s_namespace, label_selector="app=other", grace_period_seconds=0)

    with PodWatch(core, k8s_namespace, label_selector="tfk8s.io/role") as watch:
        thread = threading.Thread(target=release_when_waiting, daemon=True)
        thread.start()
        dr = run_dag("tfk8s_t_from_conf", k8s_namespace, spec=doc)
        thread.join()
    assert released, "setup never said waits"
    assert dr.state == "success", states(dr)
    record = xcom(dr, "train.setup", "preflight")
    assert record["verdict"] == "runs now" and record["waited_s"] >= 2, record
    assert len(watch.lives) == 2
    # Nothing of the job existed while it waited: its pods were created after the GPUs came free.
    assert all(life.added > released[0] for life in watch.lives.values())
    assert {life.pod.spec.node_name for life in watch.lives.values()} == set(names)
    assert leftovers(core, k8s_namespace) == []


def test_without_permission_to_list_nodes_the_preflight_is_skipped_and_the_job_runs(
        k8s_cluster, k8s_namespace, airflow_db, tmp_path, monkeypatch):
    """An account with only deploy/rbac.yaml's namespaced Role: the verdict cannot be made, the job is not refused."""
    from tests.airflow.test_tfjob_k8s import _job_account

    _job_account(k8s_cluster, k8s_namespace, tmp_path, monkeypatch)
    doc = {"name": "pf-rbac", "namespace": k8s_namespace, "image": "tfk8s/trainer:0.1",
           "node_selector": {"type": "kwok"}, "worker": {"replicas": 1, "annotations": OK}}
    dr = run_dag("tfk8s_t_from_conf", k8s_namespace, spec=doc)
    assert dr.state == "success", states(dr)
    record = xcom(dr, "train.setup", "preflight")
    assert record["verdict"] == "skipped" and "403" in record["reason"], record
    assert leftovers(k8s_cluster.core_v1, k8s_namespace) == []


def test_waiting_longer_than_schedule_timeout_fails_setup_with_nothing_created(
        k8s_cluster, k8s_namespace, airflow_db, gpu_nodes):
    core = k8s_cluster.core_v1
    tag, names = gpu_nodes
    occupy_gpus(core, k8s_namespace, names)
    with PodWatch(core, k8s_namespace, label_selector="tfk8s.io/role") as watch:
        dr = run_dag("tfk8s_t_from_conf", k8s_namespace, spec=job_spec(k8s_namespace, tag, gpus=4,
                                                                       schedule_timeout="3s"))
    assert dr.state == "failed" and states(dr)[("train.setup", -1)] == "failed", states(dr)
    assert watch.lives == {}
    record = xcom(dr, "train.setup", "preflight")
    assert record["verdict"] == "waits" and record["waited_s"] >= 3, record
    assert "needs 8 nvidia.com/gpu, 2 free" in record["reason"]
    assert [p.metadata.name for p in core.list_namespaced_pod(k8s_namespace).items] == ["other-0", "other-1"]


def test_warn_creates_the_job_a_never_verdict_refuses(k8s_cluster, k8s_namespace, airflow_db, gpu_nodes,
                                                      monkeypatch):
    """``[tfk8s] preflight = warn`` (a cluster with an autoscaler): the verdict is logged and kept, the job is
    created, and the judge fails it after schedule_timeout as before."""
    monkeypatch.setenv("AIRFLOW__TFK8S__PREFLIGHT", "warn")
    tag, _ = gpu_nodes
    with PodWatch(k8s_cluster.core_v1, k8s_namespace, label_selector="tfk8s.io/role") as watch:
        dr = run_dag("tfk8s_t_from_conf", k8s_namespace,
                     spec=job_spec(k8s_namespace, tag, gpus=8, schedule_timeout="3s"))
    assert dr.state == "failed" and states(dr)[("train.setup", -1)] == "success", states(dr)
    record = xcom(dr, "train.setup", "preflight")
    assert record["verdict"] == "never" and record["mode"] == "warn", record
    assert len(watch.lives) == 2
    assert "Unschedulable" in xcom(dr, "train.wait", "summary")["reason"]
    assert leftovers(k8s_cluster.core_v1, k8s_namespace) == []
