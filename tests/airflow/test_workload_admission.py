"""Admission by Kubernetes' Workload API (``admission: workload``) against the real kube-scheduler's gang scheduling.

Real parts: the devstack's kube-apiserver, kube-controller-manager and kube-scheduler 1.37 with the feature gate
``GenericWorkload`` and ``scheduling.k8s.io/v1beta1`` served, and KWOK nodes. Each test makes two KWOK nodes of 4
GPUs of its own (``gpu_nodes``: labelled and tainted for it, so no other test's pods land there), fills 6 of the 8
GPUs with a first job, and runs a job of 3 workers of one GPU each with ``dag.test()``: 2 GPUs are free, the
job needs 3. A WATCH records when each pod was bound. The first job is another team's gang under the Workload API,
made through the API as its controller would: a Workload, a PodGroup of 6 and 6 one-GPU pods naming it.

Under the Workload API no pod of the job is bound while it cannot fit whole, and all are bound together once the
other job ends; under the gate alone (the same scenario) two of the three are bound and hold their GPUs while the
third is Unschedulable: the partial binding the Workload API prevents.
"""
from __future__ import annotations

import time

import pytest

from tests.airflow.test_preflight_kwok import TAINT_KEY, gpu_nodes, job_spec  # noqa: F401 (fixture)
from tests.airflow.test_recovery_kwok import in_background
from tests.airflow.test_tfjob_k8s import leftovers, run_dag
from tests.dagrun import states, xcom
from tests.fixtures.waiting import wait_until
from tests.kueue.test_kueue_admission import output, wait_for_said
from tests.podwatch import PodWatch

pytestmark = [pytest.mark.k8s, pytest.mark.airflow]

GROUP, VERSION = "scheduling.k8s.io", "v1beta1"
OK = {"tfk8s.io/sim-duration": "3s", "tfk8s.io/sim-exit-code": "0"}


def gang_objects(custom, namespace: str) -> dict[str, list[dict]]:
    return {plural: custom.list_namespaced_custom_object(GROUP, VERSION, namespace, plural)["items"]
            for plural in ("workloads", "podgroups")}


class FirstJob:
    """Another team's gang job of ``size`` one-GPU pods under the Workload API, on the test's nodes; bound whole."""

    def __init__(self, core, custom, namespace: str, tag: str, size: int = 6):
        self.core, self.namespace = core, namespace
        self.pods = [f"first-{i}" for i in range(size)]
        gang = {"gang": {"minCount": size}}
        one_gpu = {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
        custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "workloads", {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "Workload", "metadata": {"name": "first"},
            "spec": {"podGroupTemplates": [{"name": "all", "schedulingPolicy": gang}]}})
        custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "podgroups", {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "PodGroup", "metadata": {"name": "first"},
            "spec": {"workloadRef": {"workloadName": "first", "templateName": "all"}, "schedulingPolicy": gang}})
        for pod in self.pods:
            core.create_namespaced_pod(namespace, {
                "apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod, "labels": {"app": "first"}},
                "spec": {"schedulingGroup": {"podGroupName": "first"}, "nodeSelector": {"tfk8s-pf": tag},
                         "tolerations": [{"key": TAINT_KEY, "operator": "Exists"}], "restartPolicy": "Never",
                         "containers": [one_gpu]}})
        def bound():
            pods = core.list_namespaced_pod(namespace, label_selector="app=first").items
            return len(pods) == size and all(p.spec.node_name for p in pods)
        wait_until(bound, 60, "the first job's pods bound", 0.3)

    def end(self) -> float:
        """The first job ends: its pods go. When (monotonic)."""
        at = time.monotonic()
        for pod in self.pods:
            self.core.delete_namespaced_pod(pod, self.namespace, grace_period_seconds=0)
        return at


def job_lives(watch: PodWatch) -> list:
    return [life for life in watch.lives.values() if life.labels.get("tfk8s.io/role")]


def test_under_admission_workload_no_pod_is_bound_until_the_job_fits_whole_then_all_together(
        k8s_cluster, k8s_namespace, airflow_db, gpu_nodes, capfd):  # noqa: F811 (the fixture imported above)
    from kubernetes import client

    core, custom = k8s_cluster.core_v1, client.CustomObjectsApi(k8s_cluster.api_client)
    tag, _ = gpu_nodes
    first = FirstJob(core, custom, k8s_namespace, tag)
    seen: dict = {}

    def free_the_gpus_once_the_job_waits_whole():
        # The job's tasks say where it waits before the other job ends: "... (held by PodGroup <job> (minCount (3)
        # cannot be satisfied))"; meanwhile no pod of it is bound (the WATCH would have recorded it).
        seen["said"] = wait_for_said("held by PodGroup", 120)
        lives = job_lives(watch)
        seen["bound_before"] = [life.name for life in lives if life.bound is not None]
        seen["pods_before"] = len(lives)
        seen["objects"] = {plural: [o for o in objs if o["metadata"]["name"] != "first"]
                           for plural, objs in gang_objects(custom, k8s_namespace).items()}
        seen["freed"] = first.end()

    join = in_background(free_the_gpus_once_the_job_waits_whole)
    spec = job_spec(k8s_namespace, tag, gpus=1, workers=3, admission="workload")
    spec["worker"]["annotations"] = OK
    with PodWatch(core, k8s_namespace) as watch:
        dr = run_dag("tfk8s_t_from_conf", k8s_namespace, spec=spec)
    join()
    said = output(capfd)
    assert dr.state == "success", (states(dr), said[-3000:])
    assert seen["pods_before"] == 3 and seen["bound_before"] == [], seen
    # The pre-flight saw that the job does not fit now and let the PodGroup wait on the cluster instead.
    assert xcom(dr, "train.setup", "preflight")["verdict"] == "waits"
    assert "admission workload: 3 pods form the PodGroup" in said
    # The objects setup made: the job's Workload (one gang template of 3) and its PodGroup, both owned by the
    # job's Service; every pod names the PodGroup.
    [workload], [group] = seen["objects"]["workloads"], seen["objects"]["podgroups"]
    assert workload["spec"]["podGroupTemplates"][0]["schedulingPolicy"] == {"gang": {"minCount": 3}}
    assert group["spec"]["schedulingPolicy"] == {"gang": {"minCount": 3}}
    assert group["spec"]["workloadRef"] == {"workloadName": workload["metadata"]["name"], "templateName": "replicas"}
    for obj in (workload, group):
        assert [r["kind"] for r in obj["metadata"]["ownerReferences"]] == ["Service"], obj["metadata"]
    lives = job_lives(watch)
    assert {life.pod.spec.scheduling_group.pod_group_name for life in lives} == {group["metadata"]["name"]}
    # All three bound after the first job's pods were deleted, together (one scheduling cycle of the group).
    bound = sorted(life.bound for life in lives)
    assert len(bound) == 3 and bound[0] > seen["freed"], (bound, seen["freed"])
    assert bound[-1] - bound[0] < 2.0, bound
    # Teardown deleted the Service; the garbage collector takes its Workload and PodGroup with it.
    def own_objects():
        return [o["metadata"]["name"] for objs in gang_objects(custom, k8s_namespace).values() for o in objs
                if o["metadata"]["name"] != "first"]
    wait_until(lambda: own_objects() == [], 60, "the job's Workload and PodGroup deleted with its Service")
    assert leftovers(core, k8s_namespace) == []


def test_with_gang_min_a_role_starts_with_its_minimum_and_its_other_replicas_join_as_room_frees(
        k8s_cluster, k8s_namespace, airflow_db, gpu_nodes, capfd):  # noqa: F811
    from kubernetes import client

    core, custom = k8s_cluster.core_v1, client.CustomObjectsApi(k8s_cluster.api_client)
    tag, _ = gpu_nodes
    first = FirstJob(core, custom, k8s_namespace, tag)
    seen: dict = {}

    def workers(bound: bool) -> list:
        return [life for life in job_lives(watch) if life.labels.get("tfk8s.io/role") == "worker"
                and (life.bound is not None) == bound]

    def free_the_gpus_once_the_minimum_runs():
        # 2 GPUs free, 3 workers of one GPU, gang_min 2: the worker PodGroup is placed with 2 of them.
        wait_until(lambda: len(workers(True)) == 2, 120, "the worker group's minimum (2) bound", 0.3)
        seen["waiting"] = [life.name for life in workers(False)]
        seen["objects"] = {plural: sorted(((o["metadata"]["name"], o["spec"]) for o in objs
                                           if o["metadata"]["name"] != "first"), key=lambda o: o[0])
                           for plural, objs in gang_objects(custom, k8s_namespace).items()}
        seen["freed"] = first.end()

    # all_workers: the job succeeds only once the third worker has run too.
    spec = job_spec(k8s_namespace, tag, gpus=1, workers=3, admission="workload", ps=1, success_policy="all_workers")
    spec["worker"].update(annotations=OK, gang_min=2)
    with PodWatch(core, k8s_namespace) as watch:
        join = in_background(free_the_gpus_once_the_minimum_runs)
        dr = run_dag("tfk8s_t_from_conf", k8s_namespace, spec=spec)
    join()
    said = output(capfd)
    assert dr.state == "success", (states(dr), said[-3000:])
    # Each role has its PodGroup: the PS's of 1 (all of it), the workers' of minimum 2.
    [(job, workload)] = seen["objects"]["workloads"]  # the Workload is named after the job
    assert [(t["name"], t["schedulingPolicy"]) for t in workload["podGroupTemplates"]] == [
        ("ps", {"gang": {"minCount": 1}}), ("worker", {"gang": {"minCount": 2}})]
    assert [(name, spec["schedulingPolicy"]["gang"]["minCount"]) for name, spec in seen["objects"]["podgroups"]] \
        == [(f"{job}-ps", 1), (f"{job}-worker", 2)]
    # Two workers ran while the third could not fit; under a gang of the whole job none would have been bound
    # (the first test). The third was bound once the other job's GPUs were freed.
    assert len(seen["waiting"]) == 1, seen
    lives = {life.name: life for life in job_lives(watch)}
    assert lives[seen["waiting"][0]].bound > seen["freed"]
    assert {life.pod.spec.scheduling_group.pod_group_name for life in lives.values()} == {f"{job}-ps", f"{job}-worker"}
    assert "admission workload: 3 pods form the PodGroup" in said and "before 2 can be placed together" in said


def test_under_the_gate_alone_the_same_job_binds_partly_and_holds_gpus_it_cannot_use(
        k8s_cluster, k8s_namespace, airflow_db, gpu_nodes, monkeypatch):  # noqa: F811
    from kubernetes import client

    core = k8s_cluster.core_v1
    tag, _ = gpu_nodes
    FirstJob(core, client.CustomObjectsApi(k8s_cluster.api_client), k8s_namespace, tag)
    # The pre-flight would keep setup waiting for room: off, so that the gate alone decides, as on a cluster
    # with an autoscaler (preflight = warn creates the job the same way).
    monkeypatch.setenv("AIRFLOW__TFK8S__PREFLIGHT", "off")
    # Workers that run a minute: the two bound ones keep their GPUs while the third waits (with 3 s ones, their
    # end would free room for it within schedule_timeout).
    spec = job_spec(k8s_namespace, tag, gpus=1, workers=3, admission="gate", schedule_timeout="8s")
    spec["worker"]["annotations"] = {**OK, "tfk8s.io/sim-duration": "60s"}
    with PodWatch(core, k8s_namespace) as watch:
        dr = run_dag("tfk8s_t_from_conf", k8s_namespace, spec=spec)
    assert dr.state == "failed", states(dr)
    lives = sorted(job_lives(watch), key=lambda life: life.bound or float("inf"))
    assert len(lives) == 3, [life.name for life in lives]
    # Two bound at once; the third could only be bound once teardown deleted one of them (and freed its GPU).
    first, second, third = lives
    assert first.bound is not None and second.bound is not None, [(life.name, life.bound) for life in lives]
    freed = min(t for t in (first.deleted, second.deleted) if t is not None)
    assert third.bound is None or third.bound >= freed, [(life.name, life.bound, life.deleted) for life in lives]
    reason = xcom(dr, "train.wait", "summary")["reason"]
    assert "Unschedulable" in reason and "schedule_timeout 8s" in reason and "nvidia.com/gpu" in reason, reason
    assert all(life.pod.spec.scheduling_group is None for life in lives)


def test_recovery_puts_a_replacement_in_a_new_podgroup_of_its_roles_template(k8s_cluster, k8s_namespace, airflow_db):
    from kubernetes import client

    from tests.airflow.test_recovery_kwok import spec as recovery_spec
    from tests.airflow.test_recovery_kwok import summary_of

    core, custom = k8s_cluster.core_v1, client.CustomObjectsApi(k8s_cluster.api_client)
    seen: dict = {}
    # Per-role groups (gang_min on the workers: both of them); worker-1 is evicted once running (infrastructure).
    doc = recovery_spec(k8s_namespace, admission="workload", worker={"gang_min": 2})
    with PodWatch(core, k8s_namespace) as watch:
        def evict_then_read_the_groups():
            life = watch.wait_for(lambda p: p.key == "worker-1" and "Running" in p.phases, what="running worker-1")
            core.create_namespaced_pod_eviction(life.name, k8s_namespace, client.V1Eviction(
                metadata=client.V1ObjectMeta(name=life.name, namespace=k8s_namespace)))
            watch.wait_for(lambda p: p.key == "worker-1" and p.attempt == 2, what="worker-1's replacement")
            seen["groups"] = {o["metadata"]["name"]: (o["spec"]["workloadRef"]["templateName"],
                                                      o["spec"]["schedulingPolicy"]["gang"]["minCount"])
                              for o in gang_objects(custom, k8s_namespace)["podgroups"]}
        join = in_background(evict_then_read_the_groups)
        dr = run_dag("tfk8s_t_from_conf", k8s_namespace, spec=doc)
        join()
    assert dr.state == "success", states(dr)
    attempts = summary_of(dr)["attempts"]
    assert [(a["failure_class"], a["replicas"]) for a in attempts] == [("infrastructure", ["worker-1"])], attempts
    first, second = watch.history("worker-1")
    job = first.pod.spec.scheduling_group.pod_group_name.removesuffix("-worker")
    # The replacement is in the attempt's own PodGroup of the workers' template, minCount the one pod it recreates
    # (at most the first group's 2): a group of 2 would never be placed with one pod.
    assert second.pod.spec.scheduling_group.pod_group_name == f"{job}-worker-a2"
    assert seen["groups"] == {f"{job}-ps": ("ps", 1), f"{job}-worker": ("worker", 2),
                              f"{job}-worker-a2": ("worker", 1)}, seen
    assert second.bound is not None
    assert leftovers(core, k8s_namespace) == []
