"""The pre-flight verdict on synthetic node lists: the pods judged are the pods setup builds."""
from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tfk8s_airflow.exceptions import RecordError, SpecError
from tfk8s_airflow.job.builders.objects import JobNames, plan_replicas, pod_manifest
from tfk8s_airflow.job.policy import DeploymentPolicy
from tfk8s_airflow.job.policy.preflight import (
    ENFORCE,
    NEVER,
    OFF,
    RUNS_NOW,
    WAITS,
    Node,
    PodDemand,
    PreflightRecord,
    Taint,
    _affinity_matches,
    _available_now,
    _selector_matches,
    _untolerated,
    bound_usage,
    check_mode,
    judge,
    node_from_api,
    pod_demand,
    pod_requests,
    preflight_applies,
)
from tfk8s_airflow.job.spec import parse_spec

READY = [{"type": "Ready", "status": "True"}]


def api_node(name, gpu=4, cpu="32", memory="128Gi", pods="110", labels=None, taints=(), unschedulable=False,
             ready=True):
    alloc = {"cpu": cpu, "memory": memory, "pods": pods}
    if gpu is not None:
        alloc["nvidia.com/gpu"] = str(gpu)
    return {"metadata": {"name": name, "labels": {"pool": "a", **(labels or {})}},
            "spec": {"taints": list(taints), "unschedulable": unschedulable},
            "status": {"allocatable": alloc,
                       "conditions": READY if ready else [{"type": "Ready", "status": "False"}]}}


def nodes(*objs):
    return [node_from_api(o) for o in objs]


def job_pods(doc):
    """The job's pods exactly as setup builds them."""
    spec = parse_spec({"name": "pf", "image": "tfk8s/trainer:0.1", **doc})
    names = JobNames.for_run(spec, "manual__1", dag_id="d")
    return [pod_demand(pod_manifest(spec, names, r, gated=True))
            for r in plan_replicas(spec, names, None, DeploymentPolicy())]


def test_eight_gpus_per_worker_on_nodes_of_four_never_fits():
    pods = job_pods({"ps": 1, "worker": {"replicas": 2, "resources": {"cpu": "1", "nvidia.com/gpu": 8}}})
    v = judge(nodes(api_node("n0"), api_node("n1")), {}, pods)
    assert v.verdict == NEVER
    assert "no node has 8 nvidia.com/gpu" in v.reason and "the largest has 4" in v.reason
    assert "worker" in v.reason and not v.placement


def test_a_node_selector_nothing_matches_is_named():
    pods = job_pods({"worker": 1, "node_selector": {"accelerator": "h100"}})
    v = judge(nodes(api_node("n0"), api_node("n1", labels={"accelerator": "a100"})), {}, pods)
    assert v.verdict == NEVER
    assert "node selector accelerator=h100" in v.reason and "no node has accelerator=h100" in v.reason


def test_an_untolerated_taint_is_named_and_a_toleration_lets_the_job_run():
    taint = {"key": "gpu-team", "value": "vision", "effect": "NoSchedule"}
    cluster = nodes(api_node("n0", taints=[taint]), api_node("n1", taints=[taint]))
    v = judge(cluster, {}, job_pods({"worker": 2}))
    assert v.verdict == NEVER and "gpu-team=vision:NoSchedule (on 2 node(s))" in v.reason
    tolerated = job_pods({"worker": 2, "tolerations": [{"key": "gpu-team", "operator": "Exists"}]})
    assert judge(cluster, {}, tolerated).verdict == RUNS_NOW
    # PreferNoSchedule is a preference, not a filter.
    soft = nodes(api_node("n0", taints=[{**taint, "effect": "PreferNoSchedule"}]))
    assert judge(soft, {}, job_pods({"worker": 1})).verdict == RUNS_NOW


def test_gpus_taken_by_other_pods_make_the_job_wait_with_the_numbers():
    pods = job_pods({"worker": {"replicas": 2, "resources": {"cpu": "1", "nvidia.com/gpu": 4}}})
    cluster = nodes(api_node("n0"), api_node("n1"))
    used = {"n0": {"nvidia.com/gpu": 3000}, "n1": {"nvidia.com/gpu": 2000}}
    v = judge(cluster, used, pods)
    assert v.verdict == WAITS and "needs 8 nvidia.com/gpu, 3 free" in v.reason
    assert judge(cluster, {}, pods).verdict == RUNS_NOW


def test_fragmented_room_waits_naming_the_most_free_on_one_node():
    pods = job_pods({"worker": {"replicas": 1, "resources": {"nvidia.com/gpu": 4}}})
    used = {"n0": {"nvidia.com/gpu": 2000}, "n1": {"nvidia.com/gpu": 2000}}
    v = judge(nodes(api_node("n0"), api_node("n1")), used, pods)
    assert v.verdict == WAITS and "4 nvidia.com/gpu on one node, the most free is 2" in v.reason


def test_passing_conditions_wait_they_never_fail():
    pods = job_pods({"worker": 1})
    for node in (api_node("n0", ready=False), api_node("n0", unschedulable=True),
                 api_node("n0", taints=[{"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}])):
        v = judge(nodes(node), {}, pods)
        assert v.verdict == WAITS, v
        assert "cordoned or not Ready" in v.reason


def test_the_sum_of_a_role_beyond_every_node_it_may_use_never_fits():
    pods = job_pods({"worker": {"replicas": 3, "resources": {"nvidia.com/gpu": 4}}})
    v = judge(nodes(api_node("n0"), api_node("n1"), api_node("big", gpu=16, labels={"pool": "b"})), {},
              [PodDemand(p.name, p.role, p.requests, {"pool": "a"}) for p in pods])
    assert v.verdict == NEVER and "need 12 nvidia.com/gpu in all; the 2 node(s) they may use have 8" in v.reason


def test_the_pods_count_of_a_node_is_a_resource():
    v = judge(nodes(api_node("n0", pods="2")), {}, job_pods({"ps": 1, "worker": 2}))
    assert v.verdict == NEVER and "3 pods in all" in v.reason


def test_required_node_affinity_terms():
    n = node_from_api(api_node("gpu-7", labels={"zone": "z1", "cores": "64"}))
    term = lambda *e, fields=(): {"matchExpressions": list(e), "matchFields": list(fields)}  # noqa: E731
    assert _affinity_matches(None, n)
    assert _affinity_matches((term({"key": "zone", "operator": "In", "values": ["z1", "z2"]}),), n)
    assert not _affinity_matches((term({"key": "zone", "operator": "NotIn", "values": ["z1"]}),), n)
    assert _affinity_matches((term({"key": "cores", "operator": "Gt", "values": ["32"]}),), n)
    assert not _affinity_matches((term({"key": "cores", "operator": "Lt", "values": ["32"]}),), n)
    assert _affinity_matches((term({"key": "spot", "operator": "DoesNotExist"}),), n)
    assert _affinity_matches((term(fields=[{"key": "metadata.name", "operator": "In", "values": ["gpu-7"]}]),), n)
    assert not _affinity_matches(({},), n)  # an empty term matches nothing
    # Terms are ORed.
    assert _affinity_matches((term({"key": "zone", "operator": "In", "values": ["z9"]}),
                              term({"key": "zone", "operator": "Exists"})), n)


def test_affinity_from_a_pod_template_is_judged_and_named():
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "gpu-model", "operator": "In", "values": ["h100"]}]}]}}}
    pods = job_pods({"worker": 1, "pod_template": {"spec": {"affinity": affinity}}})
    v = judge(nodes(api_node("n0")), {}, pods)
    assert v.verdict == NEVER and "required node affinity" in v.reason and "h100" in v.reason


def test_effective_requests_as_the_scheduler_computes_them():
    spec = {"containers": [{"resources": {"requests": {"cpu": "1"}, "limits": {"nvidia.com/gpu": "2"}}},
                           {"resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}],
            "initContainers": [{"resources": {"requests": {"cpu": "4"}}},
                               {"restartPolicy": "Always", "resources": {"requests": {"memory": "1Gi"}}}],
            "overhead": {"cpu": "100m"}}
    req = pod_requests(spec)
    # cpu: max(1.5 running, 4 init) + 0.1 overhead; memory: 1Gi + the 1Gi sidecar; the GPU limit is its request.
    assert req == {"cpu": 4100, "memory": 2 * 2**30 * 1000, "nvidia.com/gpu": 2000, "pods": 1000}


def test_bound_usage_counts_bound_unfinished_pods_but_not_the_jobs_own():
    def pod(node, phase="Running", job=None, cpu="1"):
        return {"metadata": {"labels": {"tfk8s.io/job": job} if job else {}},
                "spec": {"nodeName": node, "containers": [{"resources": {"requests": {"cpu": cpu}}}]},
                "status": {"phase": phase}}
    used = bound_usage([pod("n0"), pod("n0", cpu="2"), pod("n0", "Succeeded"), pod(None), pod("n1", job="mine")],
                       skip_label=("tfk8s.io/job", "mine"))
    assert used == {"n0": {"cpu": 3000, "pods": 2000}}


def test_modes_records_and_the_kueue_guard():
    assert check_mode(" Warn ") == "warn"
    with pytest.raises(SpecError, match="preflight"):
        check_mode("strict")
    with pytest.raises(SpecError, match=r"\[tfk8s\] preflight"):
        DeploymentPolicy.from_settings({"preflight": "maybe"}.get)
    assert DeploymentPolicy().preflight == ENFORCE
    assert preflight_applies(None, ENFORCE) and not preflight_applies(None, OFF)
    assert not preflight_applies("team-a", ENFORCE)  # the spec's queue or the deployment's default_queue
    rec = PreflightRecord(WAITS, "needs 8 nvidia.com/gpu, 3 free", ENFORCE, nodes=2, pods=3, waited_s=4.5)
    assert PreflightRecord.from_xcom(rec.to_xcom()) == rec
    with pytest.raises(RecordError):
        PreflightRecord.from_xcom({"version": 99})


# ------------------------------------------------------------------------------- properties
RESOURCES = ("cpu", "nvidia.com/gpu", "pods")
node_st = st.builds(
    lambda i, cpu, gpu, pods, pool, taint, cordon, ready: Node(
        f"n{i}", {"cpu": cpu * 1000, "nvidia.com/gpu": gpu * 1000, "pods": pods * 1000}, {"pool": pool},
        (taint,) if taint else (), cordon, ready),
    st.just(0), st.integers(1, 8), st.integers(0, 4), st.integers(1, 4), st.sampled_from("aab"),
    st.sampled_from([None, None, None, Taint("t", "", "NoSchedule"),
                     Taint("node.kubernetes.io/not-ready", "", "NoExecute")]),
    st.sampled_from([False, False, True]), st.sampled_from([True, True, False]))
pod_st = st.builds(
    lambda cpu, gpu, pool, tol: PodDemand("", "worker", {"cpu": cpu * 1000, "nvidia.com/gpu": gpu * 1000,
                                                         "pods": 1000},
                                          {"pool": pool} if pool else {},
                                          None, ({"key": "t", "operator": "Exists"},) if tol else ()),
    st.integers(0, 3), st.integers(0, 2), st.sampled_from(["", "", "a", "b"]), st.booleans())


def _instance(draw_nodes, draw_pods, used_frac):
    cluster = [Node(f"n{i}", n.allocatable, n.labels, n.taints, n.unschedulable, n.ready)
               for i, n in enumerate(draw_nodes)]
    pods = [PodDemand(f"worker-{i}", p.role, p.requests, p.node_selector, p.affinity_terms, p.tolerations)
            for i, p in enumerate(draw_pods)]
    used = {n.name: {k: v * f // 4 for k, v in n.allocatable.items()} for n, f in zip(cluster, used_frac, strict=False)}
    return cluster, pods, used


def _may_use(pod, node, now):
    ok = (_selector_matches(pod.node_selector, node) and _affinity_matches(pod.affinity_terms, node)
          and not _untolerated(pod, node, passing=False))
    return ok and (not now or _available_now(pod, node))


def _placement_exists(cluster, pods, free, now):
    for combo in itertools.product(range(len(cluster)), repeat=len(pods)):
        left = {n.name: dict(free[n.name]) for n in cluster}
        ok = True
        for pod, i in zip(pods, combo, strict=True):
            node = cluster[i]
            if not _may_use(pod, node, now):
                ok = False
                break
            for k, v in pod.requests.items():
                left[node.name][k] = left[node.name].get(k, 0) - v
                if left[node.name][k] < 0:
                    ok = False
            if not ok:
                break
        if ok:
            return True
    return False


@settings(max_examples=300, deadline=None)
@given(st.lists(node_st, min_size=0, max_size=3), st.lists(pod_st, min_size=1, max_size=4),
       st.lists(st.integers(0, 4), min_size=3, max_size=3))
def test_runs_now_comes_with_a_valid_placement_and_never_is_never_wrong(draw_nodes, draw_pods, used_frac):
    cluster, pods, used = _instance(draw_nodes, draw_pods, used_frac)
    v = judge(cluster, used, pods)
    free = {n.name: {k: a - used[n.name].get(k, 0) for k, a in n.allocatable.items()} for n in cluster}
    if v.verdict == RUNS_NOW:
        assert set(v.placement) == {p.name for p in pods}
        by_name = {n.name: n for n in cluster}
        left = {n: dict(f) for n, f in free.items()}
        for pod in pods:
            node = by_name[v.placement[pod.name]]
            assert _may_use(pod, node, now=True), (pod, node)
            for k, amount in pod.requests.items():
                left[node.name][k] = left[node.name].get(k, 0) - amount
        assert all(x >= 0 for f in left.values() for x in f.values()), left
    else:
        assert not v.placement
    if v.verdict == NEVER:  # a proof: not even on empty nodes, whatever their passing conditions
        empty = {n.name: dict(n.allocatable) for n in cluster}
        assert not _placement_exists(cluster, pods, empty, now=False), v.reason
    if v.verdict == WAITS:
        assert v.reason


@settings(max_examples=100, deadline=None)
@given(st.lists(node_st, min_size=1, max_size=6), st.lists(pod_st, min_size=1, max_size=8),
       st.lists(st.integers(0, 4), min_size=6, max_size=6), st.randoms(use_true_random=False))
def test_the_verdict_does_not_depend_on_the_order_of_nodes_and_pods(draw_nodes, draw_pods, used_frac, rnd):
    cluster, pods, used = _instance(draw_nodes, draw_pods, used_frac)
    first = judge(cluster, used, pods)
    shuffled_nodes, shuffled_pods = list(cluster), list(pods)
    rnd.shuffle(shuffled_nodes)
    rnd.shuffle(shuffled_pods)
    assert judge(shuffled_nodes, used, shuffled_pods) == first
