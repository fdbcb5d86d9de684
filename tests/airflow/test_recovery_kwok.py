"""Recovery on simulated faults: eviction, preemption, a lost node, OOM kills (KWOK, dag.test()).

The API server, scheduler, Eviction API and garbage collection are real; the pods are KWOK's.
Faults come from the real Eviction API, from KWOK's ``tfk8s-pod-fault`` stage (annotation
``tfk8s.io/sim-fault``: ``preempt`` or ``oom`` on a job's first attempt, see
devstack/components/k8s/kwok-stages.yaml), and from a node this test takes away from KWOK and
reports NotReady, as the node lifecycle controller would for a node that stopped answering.
Each test states the expected outcome of docs/recovery.md's fault table and asserts it, and that
nothing of the job is left.
"""
from __future__ import annotations

import threading
import time
import uuid

import pytest

from tests.airflow.test_tfjob_k8s import leftovers, run_dag
from tests.dagrun import states, xcom
from tests.podwatch import PodWatch

pytestmark = [pytest.mark.k8s, pytest.mark.airflow]

IMAGE = "tfk8s/trainer:0.1"


def spec(namespace: str, **extra):
    base = {"name": "rec", "namespace": namespace, "image": IMAGE, "node_selector": {"type": "kwok"},
            "ps": 1, "worker": {"replicas": 2, "annotations": {"tfk8s.io/sim-duration": "12s"}},
            "max_restarts": 0, "group_restarts": 0, "restart_backoff": "1s"}
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            base[key] = {**base[key], **value}
        else:
            base[key] = value
    return base


def summary_of(dr):
    return xcom(dr, "train.wait", "summary")


def in_background(fn):
    """Run ``fn`` beside dag.test(); re-raise its exception (a fault never injected fails the test)."""
    errors: list[BaseException] = []

    def run():
        try:
            fn()
        except BaseException as exc:  # noqa: BLE001 - reported by join()
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()

    def join():
        thread.join(30)
        if errors:
            raise errors[0]
    return join


def test_evicted_worker_is_replaced_without_spending_the_restart_budgets(k8s_cluster, k8s_namespace, airflow_db):
    from kubernetes import client

    core = k8s_cluster.core_v1
    with PodWatch(core, k8s_namespace) as watch:
        def evict():
            life = watch.wait_for(lambda p: p.key == "worker-1" and "Running" in p.phases, what="running worker-1")
            core.create_namespaced_pod_eviction(life.name, k8s_namespace, client.V1Eviction(
                metadata=client.V1ObjectMeta(name=life.name, namespace=k8s_namespace)))
        join = in_background(evict)
        dr = run_dag("tfk8s_t_from_conf", k8s_namespace, spec=spec(k8s_namespace))
        join()
    assert dr.state == "success", states(dr)
    attempts = summary_of(dr)["attempts"]
    assert len(attempts) == 1, attempts
    assert attempts[0]["failure_class"] == "infrastructure" and attempts[0]["action"] == "replace"
    assert attempts[0]["replicas"] == ["worker-1"]
    lives = watch.history("worker-1")
    assert [life.attempt for life in lives] == [1, 2]  # the same name and DNS, a new attempt
    assert lives[1].pod.spec.hostname == "worker-1" and lives[0].name == lives[1].name
    assert [life.attempt for life in watch.history("worker-0")] == [1]  # only the evicted one was replaced
    assert leftovers(core, k8s_namespace) == []


def test_preempted_workers_do_not_spend_max_restarts_or_group_restarts(k8s_cluster, k8s_namespace, airflow_db):
    core = k8s_cluster.core_v1
    doc = spec(k8s_namespace, worker={"annotations": {"tfk8s.io/sim-duration": "8s", "tfk8s.io/sim-fault": "preempt",
                                                      "tfk8s.io/sim-fault-after": "1s"}})
    with PodWatch(core, k8s_namespace) as watch:
        dr = run_dag("tfk8s_t_from_conf", k8s_namespace, spec=doc)
    assert dr.state == "success", states(dr)
    attempts = summary_of(dr)["attempts"]
    assert {a["failure_class"] for a in attempts} == {"infrastructure"}
    assert sorted(k for a in attempts for k in a["replicas"]) == ["worker-0", "worker-1"]
    assert all("PreemptionByScheduler" in a["reason"] for a in attempts), attempts
    for key in ("worker-0", "worker-1"):
        assert [life.attempt for life in watch.history(key)][-1] > 1
    assert leftovers(core, k8s_namespace) == []


def test_infra_restarts_bound_replacements_and_the_failure_names_each_attempt(k8s_cluster, k8s_namespace,
                                                                               airflow_db, capfd):
    core = k8s_cluster.core_v1
    doc = spec(k8s_namespace, infra_restarts=1,
               worker={"annotations": {"tfk8s.io/sim-duration": "8s", "tfk8s.io/sim-fault": "preempt",
                                       "tfk8s.io/sim-fault-after": "1s"}})
    dr = run_dag("tfk8s_t_from_conf", k8s_namespace, spec=doc)
    assert dr.state == "failed" and states(dr)[("train.wait", -1)] == "failed"
    summary = summary_of(dr)
    assert summary["failure_class"] == "infrastructure"
    assert "infra_restarts 1 spent" in summary["reason"] and "earlier: attempt 1 ended by infrastructure" \
        in summary["reason"], summary["reason"]
    assert leftovers(core, k8s_namespace) == []


def test_oom_killed_worker_is_relaunched_with_more_memory(k8s_cluster, k8s_namespace, airflow_db):
    core = k8s_cluster.core_v1
    doc = spec(k8s_namespace, ps=0, resources={"cpu": "100m", "memory": "1Gi"}, oom_memory_factor=1.5,
               max_memory="2Gi", worker={"replicas": 1, "annotations": {
                   "tfk8s.io/sim-duration": "6s", "tfk8s.io/sim-fault": "oom", "tfk8s.io/sim-fault-after": "1s"}})
    with PodWatch(core, k8s_namespace) as watch:
        dr = run_dag("tfk8s_t_from_conf", k8s_namespace, spec=doc)
    assert dr.state == "success", states(dr)
    summary = summary_of(dr)
    [attempt] = summary["attempts"]
    assert attempt["failure_class"] == "oom" and "relaunched with 1.50Gi (x1.5)" in attempt["reason"]
    assert summary["overrides"]["worker-0"]["memory"] == 1.5 * 2**30  # where the next run can start
    first, second = watch.history("worker-0")
    memory = [life.pod.spec.containers[0].resources.limits["memory"] for life in (first, second)]
    assert memory == ["1Gi", str(int(1.5 * 2**30))]
    assert leftovers(core, k8s_namespace) == []


def test_oom_beyond_max_memory_fails_the_job_as_oom(k8s_cluster, k8s_namespace, airflow_db):
    core = k8s_cluster.core_v1
    doc = spec(k8s_namespace, ps=0, resources={"cpu": "100m", "memory": "1Gi"}, oom_memory_factor=1.5,
               max_memory="1200Mi", worker={"replicas": 1, "annotations": {
                   "tfk8s.io/sim-duration": "6s", "tfk8s.io/sim-fault": "oom", "tfk8s.io/sim-fault-after": "1s"}})
    dr = run_dag("tfk8s_t_from_conf", k8s_namespace, spec=doc)
    assert dr.state == "failed"
    summary = summary_of(dr)
    assert summary["failure_class"] == "oom" and summary["attempts"] == []
    assert "OOMKilled" in summary["reason"] and "would exceed max_memory 1.17Gi" in summary["reason"]
    assert leftovers(core, k8s_namespace) == []


@pytest.fixture()
def two_nodes(k8s_cluster, k8s_namespace):
    """Two KWOK nodes only this test's pods select: ``lost`` schedulable first, ``spare`` cordoned."""
    core = k8s_cluster.core_v1
    tag = uuid.uuid4().hex[:6]
    names = {"lost": f"rec-lost-{tag}", "spare": f"rec-spare-{tag}"}
    for role, name in names.items():
        core.create_node({"apiVersion": "v1", "kind": "Node",
                          "metadata": {"name": name, "annotations": {"kwok.x-k8s.io/node": "fake"},
                                       "labels": {"type": f"rec-{tag}", "kubernetes.io/hostname": name}},
                          "spec": {"unschedulable": role == "spare"},
                          "status": {"allocatable": {"cpu": "32", "memory": "64Gi", "pods": "50"},
                                     "capacity": {"cpu": "32", "memory": "64Gi", "pods": "50"}}})
    deadline = time.monotonic() + 60
    while any(not _ready(core.read_node(n)) for n in names.values()):
        assert time.monotonic() < deadline, "KWOK did not make the test's nodes Ready"
        time.sleep(0.5)
    yield names, f"rec-{tag}"
    for name in names.values():
        core.delete_node(name)


def _ready(node) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])


@pytest.mark.serial  # it bounds the recovery's wall time; its schedulable node would take other tests' pods
def test_replicas_on_a_lost_node_are_replaced_elsewhere_after_the_grace(k8s_cluster, k8s_namespace, airflow_db,
                                                                        two_nodes):
    core = k8s_cluster.core_v1
    names, label = two_nodes
    grace = 10
    doc = spec(k8s_namespace, node_selector={"type": label}, node_lost_grace=f"{grace}s",
               worker={"annotations": {"tfk8s.io/sim-duration": "20s"}})
    lost_at: list[float] = []
    with PodWatch(core, k8s_namespace) as watch:
        def lose_node():
            for key in ("ps-0", "worker-0", "worker-1"):
                watch.wait_for(lambda p, k=key: p.key == k and "Running" in p.phases, what=f"running {key}")
            core.patch_node(names["spare"], {"spec": {"unschedulable": False}})
            # KWOK no longer answers for the node; then it is reported as one that stopped answering.
            core.patch_node(names["lost"], {"metadata": {"annotations": {"kwok.x-k8s.io/node": None}}})
            now = time.time()
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))
            core.patch_node_status(names["lost"], {"status": {"conditions": [
                {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
                 "message": "Kubelet stopped posting node status.", "lastHeartbeatTime": stamp,
                 "lastTransitionTime": stamp}]}})
            lost_at.append(now)
        join = in_background(lose_node)
        dr = run_dag("tfk8s_t_from_conf", k8s_namespace, spec=doc)
        join()
    assert dr.state == "success", states(dr)
    [attempt] = summary_of(dr)["attempts"]
    assert attempt["failure_class"] == "infrastructure" and attempt["action"] == "restart_group"  # a PS was there
    assert f"node {names['lost']} lost" in attempt["reason"]
    waited = attempt["at"] - lost_at[0]
    print(f"replaced {waited:.1f}s after the node was lost (grace {grace}s, poll 1s)")
    assert waited >= grace  # never before the grace
    assert waited < 120  # Kubernetes itself evicts after its 5 min toleration: this was the job's recovery
    for key in ("ps-0", "worker-0", "worker-1"):
        first, second = watch.history(key)
        assert first.pod.spec.node_name == names["lost"] and second.pod.spec.node_name == names["spare"]
        assert second.attempt == 2
    assert leftovers(core, k8s_namespace) == []


def test_templates_rewritten_in_the_namespace_are_refused_and_no_pod_is_made_from_them(
        k8s_cluster, k8s_namespace, airflow_db):
    """Who may write ConfigMaps in the job's namespace, but not create pods, cannot choose what
    recovery creates: the pod templates are read only while they hold the digest setup kept in the
    job record. Here they are rewritten (same pods, another image) before a worker is evicted."""
    import base64
    import json
    import lzma

    from kubernetes import client

    from tfk8s_airflow.job.builders.templatemap import TEMPLATES_KEY
    from tfk8s_airflow.k8s.relaunch import read_templates

    core = k8s_cluster.core_v1
    with PodWatch(core, k8s_namespace) as watch:
        def rewrite_then_evict():
            life = watch.wait_for(lambda p: p.key == "worker-1" and "Running" in p.phases, what="running worker-1")
            cm = next(c for c in core.list_namespaced_config_map(k8s_namespace).items
                      if TEMPLATES_KEY in (c.binary_data or {}))
            pods = read_templates(cm.binary_data, "the test")
            for pod in pods:
                pod["spec"]["containers"][0]["image"] = "evil/miner:1"
            cm.binary_data = {TEMPLATES_KEY: base64.b64encode(lzma.compress(json.dumps(pods).encode())).decode()}
            core.replace_namespaced_config_map(cm.metadata.name, k8s_namespace, cm)
            core.create_namespaced_pod_eviction(life.name, k8s_namespace, client.V1Eviction(
                metadata=client.V1ObjectMeta(name=life.name, namespace=k8s_namespace)))
        join = in_background(rewrite_then_evict)
        dr = run_dag("tfk8s_t_from_conf", k8s_namespace, spec=spec(k8s_namespace))
        join()
        images = {c.image for life in watch.lives.values() for c in life.pod.spec.containers}
    assert dr.state == "failed" and states(dr)[("train.wait", -1)] == "failed"
    reason = summary_of(dr)["reason"]
    assert "no longer holds what setup wrote" in reason and "pod templates" in reason, reason
    assert images == {IMAGE}, images  # no pod was ever made from the rewritten templates
    assert leftovers(core, k8s_namespace) == []
