"""Gang admission through a real Kueue: a job with ``queue:`` is one Kueue pod group, admitted whole.

Real parts: the devstack's kube-apiserver, scheduler and KWOK nodes (4 nvidia.com/gpu each), and Kueue
v0.19.2 built from its Go module (``devstack/up kueue``: plain-pod integration, the ClusterQueue
``tfk8s-test`` of 8 cpu, 32Gi, 4 GPUs). Each test makes its own namespace, opted in to Kueue by the
label the devstack's Kueue selects namespaces by, with its own LocalQueue on that ClusterQueue; the
ClusterQueue is shared, so this module's tests run one after another (pytest-xdist keeps a module on
one worker). DAG runs with ``dag.test()``.

"The first job" of the queue tests is a Kueue pod group the test makes itself through the API (4 pods
of 1 GPU each, as any other team's job in the queue would be), and its teardown is what the plugin's
teardown does: its Workload deleted, then its pods.
"""
from __future__ import annotations

import subprocess
import time
import uuid

import pytest

from tests.airflow.test_recovery_kwok import in_background
from tests.airflow.test_tfjob_k8s import leftovers, run_dag
from tests.dagrun import states, xcom
from tests.fixtures.k8s import DEVSTACK, _parse_exports
from tests.fixtures.waiting import wait_until

pytestmark = [pytest.mark.k8s, pytest.mark.airflow]

GROUP, VERSION = "kueue.x-k8s.io", "v1beta2"
ADMISSION_GATE = "kueue.x-k8s.io/admission"
QUEUE = "lq"


@pytest.fixture(scope="module")
def kueue(k8s_cluster) -> dict[str, str]:
    up = subprocess.run([str(DEVSTACK / "up"), "kueue"], capture_output=True, text=True, timeout=1800)
    if up.returncode != 0:
        pytest.fail(f"devstack/up kueue failed (exit {up.returncode}):\n{up.stdout[-3000:]}\n{up.stderr[-6000:]}",
                    pytrace=False)
    env = _parse_exports(subprocess.run([str(DEVSTACK / "env"), "kueue"], capture_output=True, text=True,
                                        timeout=60).stdout)
    assert "TFK8S_KUEUE_OPT_IN_LABEL" in env, env
    return env


@pytest.fixture
def custom(k8s_cluster):
    from kubernetes import client

    return client.CustomObjectsApi(k8s_cluster.api_client)


@pytest.fixture
def queue_ns(k8s_cluster, k8s_namespace, kueue, custom):
    """A namespace Kueue manages, with the LocalQueue ``lq`` on the devstack's ClusterQueue."""
    core = k8s_cluster.core_v1
    core.patch_namespace(k8s_namespace, {"metadata": {"labels": {kueue["TFK8S_KUEUE_OPT_IN_LABEL"]: "true"}}})
    custom.create_namespaced_custom_object(GROUP, VERSION, k8s_namespace, "localqueues", {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "LocalQueue", "metadata": {"name": QUEUE},
        "spec": {"clusterQueue": kueue["TFK8S_KUEUE_CLUSTER_QUEUE"]}})
    yield k8s_namespace
    # Workloads first, so that Kueue lets the pods go before the namespace is deleted; and gone before the next
    # test, which shares the ClusterQueue's quota (the namespace itself is deleted without waiting).
    from kubernetes.client.exceptions import ApiException

    for name in workloads(custom, k8s_namespace):
        try:
            custom.delete_namespaced_custom_object(GROUP, VERSION, k8s_namespace, "workloads", name)
        except ApiException as exc:
            if exc.status != 404:  # gone meanwhile (Kueue deletes a finished group's Workload itself)
                raise
    core.delete_collection_namespaced_pod(k8s_namespace, grace_period_seconds=0)
    wait_until(lambda: not workloads(custom, k8s_namespace) and not core.list_namespaced_pod(k8s_namespace).items, 60,
             f"the Workloads and pods of {k8s_namespace} to be deleted")


def workloads(custom, namespace: str) -> list[str]:
    return [w["metadata"]["name"] for w in custom.list_namespaced_custom_object(GROUP, VERSION, namespace,
                                                                               "workloads")["items"]]


def spec(namespace: str, workers: int = 2, gpus: int = 1, seconds: str = "3s", **extra) -> dict:
    return {"name": "queued", "namespace": namespace, "image": "tfk8s/trainer:0.1", "node_selector": {"type": "kwok"},
            "queue": QUEUE, "ps": 1,
            "worker": {"replicas": workers, "resources": {"cpu": 1, "memory": "1Gi", "nvidia.com/gpu": gpus},
                       "annotations": {"tfk8s.io/sim-duration": seconds, "tfk8s.io/sim-exit-code": "0"}},
            **extra}


class Blocker:
    """Another team's job in the same queue: a Kueue pod group of ``gpus`` pods of one GPU each."""

    def __init__(self, core, custom, namespace: str, gpus: int = 4, priority: str | None = None):
        self.core, self.custom, self.namespace = core, custom, namespace
        self.name = f"other-{uuid.uuid4().hex[:6]}"
        labels = {"kueue.x-k8s.io/queue-name": QUEUE, "kueue.x-k8s.io/pod-group-name": self.name}
        if priority:
            labels["kueue.x-k8s.io/priority-class"] = priority
        self.pods = [f"{self.name}-{i}" for i in range(gpus)]
        for pod in self.pods:
            core.create_namespaced_pod(namespace, {
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": pod, "labels": labels,
                             "annotations": {"kueue.x-k8s.io/pod-group-total-count": str(gpus)}},
                "spec": {"nodeSelector": {"type": "kwok"}, "restartPolicy": "Never",
                         "containers": [{"name": "c", "image": "x", "resources": {
                             "requests": {"cpu": "1", "nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}}]}})

    def running(self) -> bool:
        pods = [self.core.read_namespaced_pod(p, self.namespace) for p in self.pods]
        return all(p.status.phase == "Running" for p in pods)

    def teardown(self) -> float:
        """As the plugin's teardown: the Workload, then the pods. When it was done (monotonic)."""
        from kubernetes.client.exceptions import ApiException

        self.custom.delete_namespaced_custom_object(GROUP, VERSION, self.namespace, "workloads", self.name)
        for pod in self.pods:
            try:
                self.core.delete_namespaced_pod(pod, self.namespace, grace_period_seconds=0)
            except ApiException as exc:
                if exc.status != 404:  # Kueue deletes a group's pods with its Workload
                    raise
        return time.monotonic()


def job_pods(core, namespace: str) -> list:
    return core.list_namespaced_pod(namespace, label_selector="tfk8s.io/job").items


def gates(pod) -> list[str]:
    return [g.name for g in pod.spec.scheduling_gates or []]


def output(capfd) -> str:
    """What the DAG run printed: dag.test() writes every task's log (and the triggers') to the console."""
    out = capfd.readouterr()
    return out.out + out.err


def wait_for_said(needle: str, timeout: float) -> str:
    """Wait until this test's console output (what ``capfd`` holds: fds 1 and 2 point at its files) has a line
    with ``needle``; that line. Read through /proc from the start of each file, so nothing ``capfd`` holds is
    consumed: a thread can wait on what the DAG run it runs beside says."""
    deadline = time.monotonic() + timeout
    while True:
        lines: list[str] = []
        for fd in (1, 2):
            with open(f"/proc/self/fd/{fd}", "rb") as f:
                lines += f.read().decode(errors="replace").splitlines()
        line = next((ln for ln in lines if needle in ln), None)
        if line is not None:
            return line
        if time.monotonic() > deadline:
            raise AssertionError(f"nothing said {needle!r} within {timeout:.0f}s; the last lines:\n"
                                 + "\n".join(lines[-15:]))
        time.sleep(0.2)


def sensor_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if "TF job" in line]


def test_queue_in_a_namespace_kueue_does_not_manage_fails_setup(k8s_cluster, k8s_namespace, kueue, airflow_db,
                                                                capfd):
    dr = run_dag("tfk8s_t_from_conf", k8s_namespace, spec=spec(k8s_namespace))
    st = states(dr)
    assert dr.state == "failed" and st[("train.setup", -1)] == "failed", st
    said = output(capfd)
    assert f"Kueue does not manage namespace {k8s_namespace}" in said, said[-3000:]
    assert "queue" in said
    assert leftovers(k8s_cluster.core_v1, k8s_namespace) == []


def test_a_job_over_the_cluster_queues_maximum_fails_within_a_poll_with_kueues_reason(
        k8s_cluster, queue_ns, custom, airflow_db, monkeypatch):
    # The queue from the deployment's default ([tfk8s] default_queue), the spec naming none.
    monkeypatch.setenv("AIRFLOW__TFK8S__DEFAULT_QUEUE", QUEUE)
    over = spec(queue_ns, workers=2, gpus=4, seconds="60s")
    del over["queue"]
    t0 = time.monotonic()
    dr = run_dag("tfk8s_t_from_conf", queue_ns, spec=over)
    took = time.monotonic() - t0
    assert dr.state == "failed", states(dr)
    summary = xcom(dr, "train.wait", "summary")
    assert summary["failure_class"] == "config", summary
    assert "Kueue can never admit job" in summary["reason"] and f"in queue {QUEUE}" in summary["reason"], summary
    assert "> maximum capacity (4)" in summary["reason"], summary["reason"]
    assert took < 60, took  # not a timeout: the job would otherwise have waited for active_deadline
    assert leftovers(k8s_cluster.core_v1, queue_ns) == [] and workloads(custom, queue_ns) == []


def test_a_localqueue_that_does_not_exist_fails_within_a_poll_with_kueues_reason(k8s_cluster, queue_ns, custom,
                                                                                 airflow_db):
    dr = run_dag("tfk8s_t_from_conf", queue_ns, spec={**spec(queue_ns), "queue": "nope"})
    assert dr.state == "failed", states(dr)
    summary = xcom(dr, "train.wait", "summary")
    assert summary["failure_class"] == "config", summary
    assert "Kueue can never admit job" in summary["reason"], summary["reason"]
    assert "LocalQueue nope doesn't exist" in summary["reason"], summary["reason"]
    assert leftovers(k8s_cluster.core_v1, queue_ns) == [] and workloads(custom, queue_ns) == []


def test_behind_a_full_queue_admission_timeout_fails_cleanly_and_teardown_deletes_the_workload(
        k8s_cluster, queue_ns, custom, airflow_db, capfd):
    core = k8s_cluster.core_v1
    first = Blocker(core, custom, queue_ns)
    wait_until(first.running, 60, "the first job's pods Running")
    seen: dict[str, tuple[list[str], str | None]] = {}

    def record():
        deadline = time.monotonic() + 60
        while len(seen) < 3 and time.monotonic() < deadline:
            for p in job_pods(core, queue_ns):
                if "tfk8s.io/gang" not in gates(p):
                    seen[p.metadata.name] = (gates(p), p.spec.node_name)
            time.sleep(0.2)
    join = in_background(record)
    dr = run_dag("tfk8s_t_from_conf", queue_ns, spec=spec(queue_ns, admission_timeout="5s"))
    join()
    text = output(capfd)
    assert dr.state == "failed", states(dr)
    assert len(seen) == 3 and all(ADMISSION_GATE in g and node is None for g, node in seen.values()), seen
    reason = xcom(dr, "train.wait", "summary")["reason"]
    assert f"is held by {ADMISSION_GATE}" in reason and "(admission_timeout 5s)" in reason, reason
    # Where Kueue had it, in Kueue's words (its queue, since when, why it waits).
    assert f"; queued in {QUEUE}, position 1, since " in reason, reason
    assert "insufficient unused quota for nvidia.com/gpu" in reason, reason
    assert any(f"queued in {QUEUE}" in line for line in sensor_lines(text)), sensor_lines(text)[-10:]
    # The job's own objects and Workload are gone; the first job's are not touched.
    assert sorted(workloads(custom, queue_ns)) == [first.name]
    assert sorted(leftovers(core, queue_ns)) == sorted(first.pods)
    first.teardown()


def test_the_second_job_waits_whole_and_is_admitted_whole_after_the_firsts_teardown(
        k8s_cluster, queue_ns, custom, airflow_db, capfd):
    core = k8s_cluster.core_v1
    first = Blocker(core, custom, queue_ns)
    wait_until(first.running, 60, "the first job's pods Running")
    timeline: dict[str, float] = {}

    def first_job_ends_while_the_second_waits():
        pods = wait_until(lambda: len(job_pods(core, queue_ns)) == 3 and all(
            ADMISSION_GATE in gates(p) and "tfk8s.io/gang" not in gates(p) for p in job_pods(core, queue_ns)),
            60, "the second job's 3 pods, each held by Kueue's gate only")
        assert pods
        # The first job ends only once a task of the second has said where it waits, with its place from
        # Kueue's visibility API: without that line the test would race the triggers' first polls. dag.test()
        # runs the sensor or a replica task first, whichever it picks: "waiting for worker-0 Pending (held by
        # ...); queued in lq, position 1, since ..." or "ps-0 Pending (queued in lq, position 1, since ...".
        wait_for_said(f"queued in {QUEUE}, position 1, since ", 120)
        held = job_pods(core, queue_ns)
        assert all(p.spec.node_name is None and ADMISSION_GATE in gates(p) for p in held), \
            [(p.metadata.name, p.spec.node_name, gates(p)) for p in held]
        timeline["teardown"] = first.teardown()
        wait_until(lambda: all(p.spec.node_name for p in job_pods(core, queue_ns)), 30,
                 "every pod of the second job bound")
        timeline["bound"] = time.monotonic()
    join = in_background(first_job_ends_while_the_second_waits)
    dr = run_dag("tfk8s_t_from_conf", queue_ns, spec=spec(queue_ns, workers=2, gpus=2, admission_timeout="150s"))
    join()
    text = output(capfd)
    assert dr.state == "success", states(dr)
    admitted = timeline["bound"] - timeline["teardown"]
    assert admitted < 10, admitted
    # Whichever of the job's tasks dag.test() runs while the job waits (the sensor or a replica task) says
    # where it waits, in Kueue's words.
    queued = [line for line in text.splitlines() if f"queued in {QUEUE}, " in line]
    assert queued and "insufficient unused quota for nvidia.com/gpu" in queued[0], sensor_lines(text)[-10:]
    # Its place, from Kueue's visibility API through the API server (the only job waiting: first).
    assert any(f"queued in {QUEUE}, position 1, since " in line for line in queued), queued
    assert workloads(custom, queue_ns) == []
    assert leftovers(core, queue_ns) == []  # nothing Terminating either


def test_a_higher_priority_job_preempts_and_the_job_is_requeued_as_attempt_2(k8s_cluster, queue_ns, custom,
                                                                           airflow_db, capfd):
    core = k8s_cluster.core_v1
    names = {p: f"tfk8s-test-{p}-{uuid.uuid4().hex[:6]}" for p in ("low", "high")}
    for prio, value in (("low", 10), ("high", 1000)):
        custom.create_cluster_custom_object(GROUP, VERSION, "workloadpriorityclasses", {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "WorkloadPriorityClass",
            "metadata": {"name": names[prio]}, "value": value})
    box: dict[str, Blocker] = {}
    try:
        def preempt_then_leave():
            wait_until(lambda: len(job_pods(core, queue_ns)) == 3 and all(
                p.status.phase == "Running" for p in job_pods(core, queue_ns)), 60, "the job Running")
            box["high"] = Blocker(core, custom, queue_ns, gpus=4, priority=names["high"])
            wait_until(box["high"].running, 60, "the higher-priority job Running (after preempting)")
            time.sleep(3)
            box["high"].teardown()
        join = in_background(preempt_then_leave)
        dr = run_dag("tfk8s_t_from_conf", queue_ns,
                     spec=spec(queue_ns, workers=2, gpus=2, seconds="12s", priority_class=names["low"],
                               restart_backoff="1s"))
        join()
        assert dr.state == "success", states(dr)
        summary = xcom(dr, "train.wait", "summary")
        attempts = summary.get("attempts") or []
        assert len(attempts) == 1 and attempts[0]["number"] == 2, summary
        assert attempts[0]["failure_class"] == "infrastructure", attempts
        assert "preempted by Kueue" in attempts[0]["reason"], attempts[0]
        assert workloads(custom, queue_ns) == [] and leftovers(core, queue_ns) == []
    finally:
        for name in names.values():
            custom.delete_cluster_custom_object(GROUP, VERSION, "workloadpriorityclasses", name)





def test_teardown_leaves_a_stranger_in_its_own_kueue_group_alone(k8s_cluster, queue_ns, custom, airflow_db):
    """A namespace writer's pod named ``<job>-x`` that carries the job's label, in a Kueue pod group of its own
    named ``<job>-x``: before, teardown deleted that group's Workload (owned by a pod named ``<job>-*``) and the
    pod (the job's label). Now it acts on the job's own pods (recorded by UID, owned by its Service) and the
    Workloads they own, each by UID; the stranger and its Workload are left alone, named in a warning."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "dags"))
    import tfk8s_security_scenarios

    from tfk8s_airflow.job.run.records import JobRecord

    core = k8s_cluster.core_v1
    dr = tfk8s_security_scenarios.setup_from_conf.test(run_conf={"spec": spec(queue_ns, seconds="600s")})
    assert dr.state == "success", states(dr)
    record = JobRecord.from_xcom(xcom(dr, "setup", key="job"))
    stranger = f"{record.job}-x"
    core.create_namespaced_pod(queue_ns, {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": stranger, "labels": {"tfk8s.io/job": record.job, "kueue.x-k8s.io/queue-name": QUEUE,
                                                  "kueue.x-k8s.io/pod-group-name": stranger},
                     "annotations": {"kueue.x-k8s.io/pod-group-total-count": "1"}},
        "spec": {"nodeSelector": {"type": "kwok"}, "restartPolicy": "Never",
                 "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "100m"}}}]}})
    wait_until(lambda: core.read_namespaced_pod(stranger, queue_ns).status.phase == "Running", 60,
             "the stranger admitted by Kueue and Running")
    assert stranger in workloads(custom, queue_ns)
    dr = tfk8s_security_scenarios.teardown_only.test(run_conf={"job": record.to_xcom()})
    assert dr.state == "success", states(dr)
    assert workloads(custom, queue_ns) == [stranger]
    pod = core.read_namespaced_pod(stranger, queue_ns)
    assert pod.metadata.deletion_timestamp is None and pod.status.phase == "Running"
    assert leftovers(core, queue_ns) == [stranger]
    custom.delete_namespaced_custom_object(GROUP, VERSION, queue_ns, "workloads", stranger)


def test_a_group_not_ready_within_kueues_timeout_is_evicted_and_recovered_as_infrastructure(
        k8s_cluster, queue_ns, custom, kueue, airflow_db):
    """Kueue's waitForPodsReady (the devstack's: ``TFK8S_KUEUE_PODS_READY_TIMEOUT``, 30 s) evicts an admitted group
    whose pods are not all Ready in time. Here Kueue's quota admits a worker of 4 GPUs, but pods outside Kueue
    hold a GPU of each KWOK node, so no node can take it: it stays Pending until Kueue evicts the group. Those
    pods then go, and the job's recovery (a new pod group, attempt 2) runs it: an infrastructure attempt, the
    code budget (``group_restarts``) untouched."""
    assert kueue["TFK8S_KUEUE_PODS_READY_TIMEOUT"] == "30s", kueue
    core = k8s_cluster.core_v1
    outside = [f"outside-{i}" for i in range(2)]
    for i, name in enumerate(outside):
        core.create_namespaced_pod(queue_ns, {  # no queue label: not Kueue's, not counted in its quota
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"nodeSelector": {"kubernetes.io/hostname": f"kwok-node-{i}"}, "restartPolicy": "Never",
                     "containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}})
    wait_until(lambda: all(core.read_namespaced_pod(n, queue_ns).spec.node_name for n in outside), 60,
               "the pods outside Kueue bound")
    seen: dict[str, float] = {}

    def leave_once_evicted():
        def evicted():
            for name in workloads(custom, queue_ns):
                wl = custom.get_namespaced_custom_object(GROUP, VERSION, queue_ns, "workloads", name)
                for cond in wl.get("status", {}).get("conditions", []):
                    if cond["type"] == "Evicted" and cond["status"] == "True":
                        return cond["reason"]
            return None
        seen["reason"] = wait_until(evicted, 180, "Kueue's eviction of the job's group")
        seen["at"] = time.monotonic()
        for name in outside:
            core.delete_namespaced_pod(name, queue_ns, grace_period_seconds=0)
    join = in_background(leave_once_evicted)
    t0 = time.monotonic()
    dr = run_dag("tfk8s_t_from_conf", queue_ns, spec=spec(queue_ns, workers=1, gpus=4, seconds="3s",
                                                         schedule_timeout="10m", restart_backoff="1s"))
    join()
    assert dr.state == "success", states(dr)
    assert seen["reason"] == "PodsReadyTimeout", seen
    assert seen["at"] - t0 >= 30  # not before Kueue's timeout
    summary = xcom(dr, "train.wait", "summary")
    attempts = summary.get("attempts") or []
    assert len(attempts) == 1 and attempts[0]["number"] == 2, summary
    assert attempts[0]["failure_class"] == "infrastructure", attempts
    assert "evicted by Kueue from queue lq (PodsReadyTimeout)" in attempts[0]["reason"], attempts[0]
    assert workloads(custom, queue_ns) == [] and leftovers(core, queue_ns) == []
