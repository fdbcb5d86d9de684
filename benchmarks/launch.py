"""A tf_job's launch, waiting and teardown under Airflow, side by side with the direct-API floor.

Two modes, each measured against the floor in the same run:

``--stack`` (the real scheduler): the ``airflow_stack`` fixture's services (api-server,
scheduler with LocalExecutor, dag-processor, triggerer) on a fresh PostgreSQL database, a job
of 1 PS + workers on KWOK triggered through the REST API (``tfk8s_t_from_conf``, spec in the
conf, ``success_policy: all_workers``). Per size it prints a table row and a JSON line:

* ``created_s`` / ``bound_s`` / ``running_s``: from the DAG run's start to the last pod created /
  bound to a node / Running; ``floor_running_s``: the same Service and pods POSTed directly (16
  parallel requests) from the first POST to every pod Running (a LIST every 50 ms, as the
  live-replicas issue measured it), in a fresh namespace just before; ``floor_gated_running_s``:
  the same, the pods created held by the scheduling gate and released once all exist (16
  parallel patches), as setup does;
* ``done_to_sensor_s``: from the last worker ending to the sensor task ending (1 s poll);
  ``replica_tasks_done_s``: to the last replica task ending; ``teardown_s``: teardown's duration;
* ``airflow_cpu_s``: CPU seconds of the four services and every process they started
  (task processes included), from the trigger until every pod ran;
* ``api_requests``: requests Airflow made to the API server for the job, counted at the API
  server (Airflow uses its own ServiceAccount, and FlowSchemas matching only that identity,
  one per verb, count its requests exactly; ``pods/log`` bypasses priority and fairness and is
  counted from ``apiserver_request_total``); ``lists_per_poll``: LISTs per poll interval while
  the job trains;
* ``one_task_s``: from a DAG run's start to its single no-op task running (the cost of any
  first task on this stack).

``--concurrent N`` runs N jobs of 8 replicas (5 s poll) at once, ends all their workers
together, and prints how many polls after its job's end each sensor succeeded.

``--tfjob`` adds, in the same run, the same job as a TFJob manifest created through Kubeflow's
training-operator (``devstack/up tfjob``: v1.9.4, TFJob only), at its default client QPS and burst
and at ``--kube-api-qps 100 --kube-api-burst 200`` (the values TFJob users raise them to), each
in a fresh namespace: ``tfjob_running_s`` / ``tfjob_qps_running_s``, from the TFJob's creation to
every pod Running and every Service made (the operator makes one per replica), with
``tfjob_ratio`` / ``tfjob_qps_ratio`` to ``floor_running_s``. The operator is restarted between the
two (``devstack/down tfjob``, then ``up`` with ``TFK8S_TFJOB_QPS``/``_BURST``) and left up or down as
it was found.

``--kueue`` (needs ``devstack/up kueue``) runs each size a second time in the same run, the job
with ``queue:`` in a namespace Kueue manages (a LocalQueue on the devstack's ClusterQueue
``tfk8s-test``): a second JSON line per size, ``"mode": "stack-kueue"``, with the same fields (the
floor is the first line's) plus ``admitted_s``, from the DAG run's start to the last pod released
by Kueue's admission gate (the whole pod group admitted).

``--dagtest`` is the former benchmark: the same job through ``dag.test()`` (one process).

Run with the devstack up (``devstack/up``): ``.venv/bin/python benchmarks/launch.py --stack``
(4, 16, 64, 128 and 512 replicas; ``--replicas N`` for one size).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "dags"))

POLL = 0.05
SIZES = (4, 16, 64, 128, 512)
BENCH_NS = "tfk8s-bench"
BENCH_SA = "airflow"
VERBS = ("list", "get", "create", "patch", "delete", "deletecollection", "watch", "update")
KUEUE_MANAGED, KUEUE_GATE, KUEUE_QUEUE = "kueue.x-k8s.io/managed", "kueue.x-k8s.io/admission", "bench"
EXTRA_NODES = 3  # KWOK nodes of 250 pods each, so 512 replicas fit next to the devstack's two


def devstack_env(*components: str) -> dict[str, str]:
    out = subprocess.run([str(REPO / "devstack" / "env"), *components], capture_output=True, text=True,
                         check=True).stdout
    env = {}
    for line in out.splitlines():
        if line.startswith("export "):
            name, _, value = line[7:].partition("=")
            env[name] = shlex.split(value)[0] if value else ""
    return env


def spec_dict(namespace: str, replicas: int, duration: str | None = "15s") -> dict:
    ann = {"tfk8s.io/sim-duration": duration, "tfk8s.io/sim-exit-code": "0"} if duration else {}
    return {"name": "bench", "namespace": namespace, "image": "tfk8s/trainer:0.1",
            "node_selector": {"type": "kwok"}, "ps": 1, "success_policy": "all_workers",
            "worker": {"replicas": replicas - 1, "annotations": ann}}


def tfjob_manifest(namespace: str, replicas: int, duration: str = "15s") -> dict:
    """The same job as a TFJob: one PS, replicas - 1 workers that end after ``duration``, on KWOK."""
    def replica(n: int, ann: dict[str, str]) -> dict:
        return {"replicas": n, "restartPolicy": "Never", "template": {
            "metadata": {"annotations": ann},
            "spec": {"nodeSelector": {"type": "kwok"},
                     "containers": [{"name": "tensorflow", "image": "tfk8s/trainer:0.1"}]}}}
    return {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": "bench", "namespace": namespace},
            "spec": {"successPolicy": "AllWorkers", "tfReplicaSpecs": {
                "PS": replica(1, {}),
                "Worker": replica(replicas - 1, {"tfk8s.io/sim-duration": duration, "tfk8s.io/sim-exit-code": "0"})}}}


def operator(qps: int | None) -> None:
    """Restart the devstack's training-operator with this client QPS (burst twice it); None: its default."""
    env = {k: v for k, v in os.environ.items() if k not in ("TFK8S_TFJOB_QPS", "TFK8S_TFJOB_BURST")}
    if qps:
        env.update(TFK8S_TFJOB_QPS=str(qps), TFK8S_TFJOB_BURST=str(2 * qps))
    # Its QPS is a flag: down (the operator, its CRD and webhook) and up again with the new one.
    subprocess.run([str(REPO / "devstack" / "down"), "tfjob"], capture_output=True, check=True)
    up = subprocess.run([str(REPO / "devstack" / "up"), "tfjob"], capture_output=True, text=True, env=env)
    if up.returncode != 0:
        raise SystemExit(f"devstack/up tfjob failed:\n{up.stderr[-3000:]}")


def tfjob_round(cluster: Cluster, replicas: int) -> dict[str, float]:
    """The TFJob through the operator: creation to every pod Running and every Service made."""
    ns = cluster.namespace()
    try:
        api = cluster.client.CustomObjectsApi(cluster.api)
        with PodTimes(cluster, ns) as pods:
            t0 = time.time()
            api.create_namespaced_custom_object("kubeflow.org", "v1", ns, "tfjobs", tfjob_manifest(ns, replicas))
            last_running = pods.wait_running(replicas, 900)
            while len(cluster.core.list_namespaced_service(ns).items) < replicas:
                time.sleep(POLL)
            services = time.time()
        return {"running_s": max(last_running, services) - t0}
    finally:
        with contextlib.suppress(cluster.client.exceptions.ApiException):
            cluster.client.CustomObjectsApi(cluster.api).delete_collection_namespaced_custom_object(
                "kubeflow.org", "v1", ns, "tfjobs")
        cluster.drop(ns)


def tfjob_rows(cluster: Cluster, replicas: int, floor_s: float) -> dict[str, float]:
    was_up = subprocess.run([str(REPO / "devstack" / "status"), "tfjob"], capture_output=True).returncode == 0
    row: dict[str, float] = {}
    try:
        for prefix, qps in (("tfjob", None), ("tfjob_qps", 100)):
            operator(qps)
            row[f"{prefix}_running_s"] = tfjob_round(cluster, replicas)["running_s"]
            row[f"{prefix}_ratio"] = row[f"{prefix}_running_s"] / floor_s
    finally:
        if was_up:
            operator(None)
        else:
            subprocess.run([str(REPO / "devstack" / "down"), "tfjob"], capture_output=True)
    return row


def iso(ts: str | None) -> float | None:
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp() if ts else None


# ------------------------------------------------------------------------------------- cluster
class Cluster:
    """Admin access to the devstack API server, and the metrics the benchmark reads."""

    def __init__(self) -> None:
        from kubernetes import client, config

        self.env = devstack_env("k8s")
        self.api = config.new_client_from_config(self.env["KUBECONFIG"])
        # Room for the floor's 16 parallel requests, each connection kept alive, as setup's client has.
        self.api.configuration.connection_pool_maxsize = 16
        self.api.rest_client.pool_manager.connection_pool_kw["maxsize"] = 16
        self.core = client.CoreV1Api(self.api)
        self.client = client
        self._kueue_env: dict[str, str] | None = None

    def kueue_env(self) -> dict[str, str]:
        """``devstack/env kueue``: what the Kueue rounds need; it must be up."""
        if self._kueue_env is None:
            env = devstack_env("kueue")
            if "TFK8S_KUEUE_CLUSTER_QUEUE" not in env:
                raise SystemExit("--kueue needs Kueue on the devstack: devstack/up kueue")
            self._kueue_env = env
        return self._kueue_env

    def kubectl(self, *args: str, input: str | None = None) -> str:
        return subprocess.run([self.env["TFK8S_KUBECTL"], f"--kubeconfig={self.env['KUBECONFIG']}", *args],
                              capture_output=True, text=True, check=True, input=input).stdout

    def namespace(self, labels: dict[str, str] | None = None) -> str:
        name = f"bench-{uuid.uuid4().hex[:8]}"
        self.core.create_namespace({"metadata": {"name": name, "labels": labels or {}}})
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                self.core.read_namespaced_service_account("default", name)
                return name
            except self.client.exceptions.ApiException:
                time.sleep(0.2)
        raise SystemExit(f"namespace {name} got no default ServiceAccount")

    def drop(self, namespace: str) -> None:
        try:
            self.core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
            self.core.delete_namespace(namespace)
        except self.client.exceptions.ApiException:
            pass

    def metrics(self) -> dict[str, int]:
        """Requests of Airflow's identity per verb (flow schemas), and pods/log requests."""
        text = self.kubectl("get", "--raw", "/metrics")
        out: dict[str, int] = {}
        for m in re.finditer(r'^apiserver_flowcontrol_dispatched_requests_total\{([^}]*)\} (\d+)', text, re.M):
            labels = dict(kv.split("=", 1) for kv in m.group(1).split(","))
            fs = labels.get("flow_schema", "").strip('"')
            if fs.startswith("tfk8s-bench-"):
                verb = fs[len("tfk8s-bench-"):]
                out[verb] = out.get(verb, 0) + int(m.group(2))
        for m in re.finditer(r'^apiserver_request_total\{([^}]*)\} (\d+)', text, re.M):
            labels = dict(kv.split("=", 1) for kv in m.group(1).split(","))
            if labels.get("resource") == '"pods"' and labels.get("subresource") == '"log"':
                out["log"] = out.get("log", 0) + int(m.group(2))
        return out

    def airflow_identity(self, workdir: Path) -> str:
        """A ServiceAccount for Airflow's connection (cluster-admin) and per-verb FlowSchemas; its kubeconfig."""
        import yaml

        manifests = [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": BENCH_NS}},
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": BENCH_SA, "namespace": BENCH_NS}},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
             "metadata": {"name": "tfk8s-bench-airflow"},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
             "subjects": [{"kind": "ServiceAccount", "name": BENCH_SA, "namespace": BENCH_NS}]},
        ]
        for verb in VERBS:
            manifests.append({
                "apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
                "metadata": {"name": f"tfk8s-bench-{verb}"},
                "spec": {"priorityLevelConfiguration": {"name": "workload-high"}, "matchingPrecedence": 100,
                         "rules": [{"subjects": [{"kind": "ServiceAccount",
                                                  "serviceAccount": {"name": BENCH_SA, "namespace": BENCH_NS}}],
                                    "resourceRules": [{"verbs": [verb], "apiGroups": ["*"], "resources": ["*"],
                                                       "namespaces": ["*"], "clusterScope": True}]}]}})
        self.kubectl("apply", "-f", "-", input="\n---\n".join(yaml.safe_dump(m) for m in manifests))
        token = self.kubectl("create", "token", BENCH_SA, "-n", BENCH_NS, "--duration=6h").strip()
        admin = yaml.safe_load(Path(self.env["KUBECONFIG"]).read_text())
        cluster = admin["clusters"][0]
        path = workdir / "airflow-kubeconfig"
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "clusters": [cluster],
            "users": [{"name": "airflow", "user": {"token": token}}],
            "contexts": [{"name": "airflow", "context": {"cluster": cluster["name"], "user": "airflow"}}],
            "current-context": "airflow"}))
        return str(path)

    def add_nodes(self) -> list[str]:
        import yaml

        nodes = []
        for i in range(EXTRA_NODES):
            name = f"bench-kwok-{i}"
            nodes.append(name)
            self.kubectl("apply", "-f", "-", input=yaml.safe_dump({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "annotations": {"kwok.x-k8s.io/node": "fake"},
                             "labels": {"type": "kwok", "kubernetes.io/hostname": name}},
                "status": {"allocatable": {"cpu": "500", "memory": "2Ti", "pods": "250"},
                           "capacity": {"cpu": "500", "memory": "2Ti", "pods": "250"}}}))
        return nodes

    def remove_nodes(self, nodes: list[str]) -> None:
        for name in nodes:
            self.kubectl("delete", "node", name, "--ignore-not-found")


class PodTimes:
    """A WATCH of one namespace: when each pod was added, first Running, and ended (wall clock).

    Its events are read as plain JSON (no client models): the benchmark shares the machine with
    what it measures, and decoding 512 pods of 28 KB into models took a quarter of a core.
    """

    def __init__(self, cluster: Cluster, namespace: str) -> None:
        self.cluster, self.namespace = cluster, namespace
        self.added: dict[str, float] = {}
        self.running: dict[str, float] = {}
        self.ended: dict[str, float] = {}
        self.bound: dict[str, float] = {}
        self.admitted: dict[str, float] = {}  # pods Kueue manages, once its admission gate is gone
        self.roles: dict[str, str] = {}
        self.jobs: dict[str, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        from kubernetes import watch

        rv = None  # resumed from the last event seen: a watch begun afresh would send every pod again
        while not self._stop.is_set():
            try:
                kwargs = {"resource_version": rv} if rv else {}
                for ev in watch.Watch().stream(self.cluster.core.list_namespaced_pod, self.namespace,
                                               timeout_seconds=2, _request_timeout=5, deserialize=False, **kwargs):
                    now, pod = time.time(), ev["object"]
                    meta = pod.get("metadata") or {}
                    rv = meta.get("resourceVersion") or rv
                    name, labels = meta.get("name", ""), meta.get("labels") or {}
                    self.added.setdefault(name, now)
                    self.roles[name] = labels.get("tfk8s.io/role", "")
                    self.jobs[name] = labels.get("tfk8s.io/job", "")
                    phase = (pod.get("status") or {}).get("phase")
                    if (pod.get("spec") or {}).get("nodeName"):
                        self.bound.setdefault(name, now)
                    gates = [g.get("name") for g in (pod.get("spec") or {}).get("schedulingGates") or []]
                    if labels.get(KUEUE_MANAGED) == "true" and KUEUE_GATE not in gates:
                        self.admitted.setdefault(name, now)
                    if phase in ("Running", "Succeeded", "Failed"):
                        self.running.setdefault(name, now)
                    if phase in ("Succeeded", "Failed"):
                        self.ended.setdefault(name, now)
                    if self._stop.is_set():
                        return
            except Exception as exc:  # noqa: BLE001 - a namespace being deleted: watch again
                if getattr(exc, "status", None) == 410:
                    rv = None  # the resource version expired: begin afresh
                time.sleep(0.1)

    def __enter__(self) -> PodTimes:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(10)

    def wait_running(self, n: int, timeout: float) -> float:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if len(self.running) >= n:
                return max(self.running.values())
            time.sleep(POLL)
        raise SystemExit(f"only {len(self.running)}/{n} pods ran in {self.namespace} within {timeout:.0f}s")


def floor(cluster: Cluster, replicas: int, gated: bool = False) -> dict[str, float]:
    """The same Service and pods created straight through the API (16 in parallel), LISTed every 50 ms
    until all run, as the live-replicas issue measured its floor.

    ``gated``: the pods are created held by the scheduling gate and released (16 parallel patches)
    once all exist, as setup does: the floor of a launch that keeps the group together. Without, the
    plan's pods are created with the gate left off.
    """
    from tfk8s_airflow.job.builders.objects import JobNames
    from tfk8s_airflow.job.builders.plan import plan_job
    from tfk8s_airflow.job.policy import DeploymentPolicy
    from tfk8s_airflow.job.spec import parse_spec
    from tfk8s_airflow.k8s.client import GATE_PATCH, GATE_PATCH_TYPE, discard

    ns = cluster.namespace()
    prefix = "floor_gated" if gated else "floor"
    try:
        spec = parse_spec(spec_dict(ns, replicas))
        names = JobNames.for_run(spec, uuid.uuid4().hex)
        plan = plan_job(spec, names, DeploymentPolicy())  # its pods gated, as setup creates them
        pods = [p if gated else {**p, "spec": {k: v for k, v in p["spec"].items() if k != "schedulingGates"}}
                for p in plan.pods]
        t0 = time.time()
        discard(cluster.core.create_namespaced_service(ns, plan.service, _preload_content=False))
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda o: discard(cluster.core.create_namespaced_pod(ns, o, _preload_content=False)),
                          pods))
            if gated:
                list(pool.map(lambda o: discard(cluster.core.patch_namespaced_pod(
                    o["metadata"]["name"], ns, GATE_PATCH, _content_type=GATE_PATCH_TYPE,
                    _preload_content=False)), pods))
        while True:
            pods = cluster.core.list_namespaced_pod(ns, label_selector=names.selector).items
            if sum(p.status.phase in ("Running", "Succeeded") for p in pods) == replicas:
                break
            time.sleep(POLL)
        row = {f"{prefix}_running_s": time.time() - t0}
        t1 = time.time()
        cluster.core.delete_collection_namespaced_pod(ns, label_selector=names.selector, grace_period_seconds=0)
        while cluster.core.list_namespaced_pod(ns, label_selector=names.selector).items:
            time.sleep(POLL)
        if not gated:
            row["floor_teardown_s"] = time.time() - t1
        return row
    finally:
        cluster.drop(ns)


# ------------------------------------------------------------------------------------- the stack
def tree_cpu(pid: int) -> float:
    """CPU seconds of a process and all its descendants, the exited ones included (reaped children)."""
    import psutil

    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0.0
    total = 0.0
    for p in procs:
        try:
            t = p.cpu_times()
            total += t.user + t.system + t.children_user + t.children_system
        except psutil.NoSuchProcess:
            pass
    return total


class Stack:
    def __init__(self, cluster: Cluster, workdir: Path) -> None:
        from tests.fixtures.airflow_services import create_database, start_stack

        self.cluster = cluster
        kubeconfig = cluster.airflow_identity(workdir)
        self.database = create_database()
        home = workdir / "airflow"
        home.mkdir()
        conn = json.dumps({"conn_type": "kubernetes", "extra": {"kube_config_path": kubeconfig}})
        t0 = time.monotonic()
        self.stack = start_stack(home, self.database, extra_env={"AIRFLOW_CONN_KUBERNETES_DEFAULT": conn},
                                 dag_ids=("tfk8s_t_from_conf", "tfk8s_t_from_conf_poll5", "tfk8s_t_noop"))
        print(f"stack up in {time.monotonic() - t0:.0f}s", file=sys.stderr)

    def close(self) -> None:
        from tests.fixtures.airflow_services import drop_database

        self.stack.stop()
        drop_database(self.database)

    def cpu(self) -> float:
        return sum(self.cpu_by_service().values())

    def cpu_by_service(self) -> dict[str, float]:
        return {name: tree_cpu(p.pid) for name, p in self.stack.procs.items()}

    def trigger(self, dag_id: str, conf: dict) -> str:
        resp = self.stack.api.post(self.stack.url(f"api/v2/dags/{dag_id}/dagRuns"),
                                   json={"logical_date": None, "conf": conf}, timeout=60)
        if resp.status_code not in (200, 201):
            raise SystemExit(f"trigger {dag_id}: {resp.status_code} {resp.text[:500]}")
        return resp.json()["dag_run_id"]

    def run(self, dag_id: str, run_id: str) -> dict:
        return self.stack.get(f"dags/{dag_id}/dagRuns/{run_id}")

    def wait(self, dag_id: str, run_id: str, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            run = self.run(dag_id, run_id)
            if run["state"] in ("success", "failed"):
                return run
            time.sleep(0.5)
        raise SystemExit(f"{dag_id} {run_id} did not finish within {timeout:.0f}s")

    def tis(self, dag_id: str, run_id: str) -> list[dict]:
        return self.stack.task_instances(dag_id, run_id)

    def one_task_s(self) -> float:
        """From the run's start to its one task's own code running (it returns ``time.time()``)."""
        run_id = self.trigger("tfk8s_t_noop", {})
        self.wait("tfk8s_t_noop", run_id, 120)
        run = self.run("tfk8s_t_noop", run_id)
        return float(self.stack.xcom("tfk8s_t_noop", run_id, "noop")) - iso(run["start_date"])


def stack_round(stack: Stack, replicas: int, tfjob: bool = False, kueue: dict[str, Any] | None = None
                ) -> dict[str, Any]:
    """One size. ``kueue``: the plain round's row of this size, and the job goes through Kueue (its floor
    and one-task times are that row's, measured in the same run)."""
    cluster = stack.cluster
    row: dict[str, Any] = {"replicas": replicas, "mode": "stack" if kueue is None else "stack-kueue"}
    if kueue is None:
        row.update(floor(cluster, replicas))
        row.update(floor(cluster, replicas, gated=True))
        if tfjob:
            row.update(tfjob_rows(cluster, replicas, row["floor_running_s"]))
        row["one_task_s"] = stack.one_task_s()
        ns = cluster.namespace()
    else:
        row.update({k: v for k, v in kueue.items() if k.startswith("floor_") or k == "one_task_s"})
        ns = cluster.namespace({cluster.kueue_env()["TFK8S_KUEUE_OPT_IN_LABEL"]: "true"})
        cluster.kubectl("apply", "-n", ns, "-f", "-", input=json.dumps({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": KUEUE_QUEUE},
            "spec": {"clusterQueue": cluster.kueue_env()["TFK8S_KUEUE_CLUSTER_QUEUE"]}}))
    try:
        with PodTimes(cluster, ns) as pods:
            m0, by0 = cluster.metrics(), stack.cpu_by_service()
            cpu0 = sum(by0.values())
            # The workers train long enough for the LIST count below to be taken while they do.
            duration = f"{max(15, replicas // 8)}s"
            spec = spec_dict(ns, replicas, duration=duration)
            if kueue is not None:
                spec["queue"] = KUEUE_QUEUE
            run_id = stack.trigger("tfk8s_t_from_conf", {"namespace": ns, "spec": spec})
            try:
                last_running = pods.wait_running(replicas, 600)
            except SystemExit as exc:  # say where the run stands: the setup's state and reason
                states = {(t["task_id"], t["map_index"]): t["state"] for t in stack.tis("tfk8s_t_from_conf", run_id)
                          if t["task_id"] != "train.replica"}
                raise SystemExit(f"{exc}; run {run_id}: {states}; logs in {stack.stack.home}") from None
            by1 = stack.cpu_by_service()
            row["airflow_cpu_s"] = sum(by1.values()) - cpu0
            row["airflow_cpu_by_service"] = {k: round(by1[k] - by0.get(k, 0.0), 2) for k in by1}
            waiting = time.monotonic() + 60  # until the sensor and every replica task wait in the triggerer
            while time.monotonic() < waiting:
                tis = [t for t in stack.tis("tfk8s_t_from_conf", run_id)
                       if t["task_id"] in ("train.wait", "train.replica")]
                if len(tis) == replicas + 1 and all(t["state"] == "deferred" for t in tis):
                    break
                time.sleep(0.2)
            # 'deferred' is set by the scheduler; the triggerer starts the triggers a moment later:
            # measure once the job's watch has started listing.
            base = cluster.metrics().get("list", 0)
            while time.monotonic() < waiting and cluster.metrics().get("list", 0) == base:
                time.sleep(0.2)
            m1 = cluster.metrics()
            t1 = time.monotonic()
            time.sleep(5)  # the job still trains (15 s): every LIST now is a poll of the job's watch
            m2 = cluster.metrics()
            # LISTs per poll interval (1 s): 1.0 is one LIST per poll for the whole job
            row["lists_per_poll"] = (m2.get("list", 0) - m1.get("list", 0)) / (time.monotonic() - t1)
            run = stack.wait("tfk8s_t_from_conf", run_id, 900)
            m3 = cluster.metrics()
        if run["state"] != "success":
            raise SystemExit(f"benchmark run {run_id} failed: {stack.tis('tfk8s_t_from_conf', run_id)}")
        start = iso(run["start_date"])
        tis = stack.tis("tfk8s_t_from_conf", run_id)
        sensor = next(t for t in tis if t["task_id"] == "train.wait")
        teardown = next(t for t in tis if t["task_id"] == "train.teardown")
        replica_end = max(iso(t["end_date"]) for t in tis if t["task_id"] == "train.replica")
        workers_done = max(t for name, t in pods.ended.items() if pods.roles.get(name) == "worker")
        row.update({
            "created_s": max(pods.added.values()) - start, "running_s": last_running - start,
            "bound_s": max(pods.bound.values()) - start,
            "done_to_sensor_s": iso(sensor["end_date"]) - workers_done,
            "replica_tasks_done_s": replica_end - workers_done,
            "teardown_s": iso(teardown["end_date"]) - iso(teardown["start_date"]),
            "api_requests": sum(m3.get(k, 0) - m0.get(k, 0) for k in set(m3) | set(m0)),
            "api_by_verb": {k: m3.get(k, 0) - m0.get(k, 0) for k in sorted(set(m3) | set(m0))
                            if m3.get(k, 0) - m0.get(k, 0)},
        })
        if kueue is not None:
            if len(pods.admitted) < replicas:
                raise SystemExit(f"only {len(pods.admitted)}/{replicas} pods were seen admitted by Kueue")
            row["admitted_s"] = max(pods.admitted.values()) - start
    finally:
        cluster.drop(ns)
    return row


def concurrent(stack: Stack, jobs: int) -> dict[str, Any]:
    """``jobs`` jobs of 8 replicas whose workers all end at once; sensors' delay in polls (5 s)."""
    from tfk8s_airflow.k8s.client import discard

    cluster = stack.cluster
    ns = cluster.namespace()
    interval = 5.0
    try:
        with PodTimes(cluster, ns) as pods:
            runs = [stack.trigger("tfk8s_t_from_conf_poll5",
                                  {"namespace": ns, "spec": {**spec_dict(ns, 8, duration=None), "name": f"c{i}"}})
                    for i in range(jobs)]
            pods.wait_running(8 * jobs, 900)
            deadline = time.monotonic() + 600
            while time.monotonic() < deadline:  # every sensor waits in the triggerer
                states = [t["state"] for r in runs for t in stack.tis("tfk8s_t_from_conf_poll5", r)
                          if t["task_id"] == "train.wait"]
                if len(states) == jobs and all(s == "deferred" for s in states):
                    break
                time.sleep(2)
            workers = [p for p in cluster.core.list_namespaced_pod(ns, label_selector="tfk8s.io/role=worker").items]
            patch = {"metadata": {"annotations": {"tfk8s.io/sim-duration": "1s", "tfk8s.io/sim-exit-code": "0"}}}
            t_end = time.time()
            with ThreadPoolExecutor(16) as pool:
                list(pool.map(lambda p: discard(cluster.core.patch_namespaced_pod(p.metadata.name, ns, patch,
                                                                                  _preload_content=False)), workers))
            for r in runs:
                stack.wait("tfk8s_t_from_conf_poll5", r, 900)
        from tfk8s_airflow.job.naming import job_name

        polls = []
        for r in runs:
            sensor = next(t for t in stack.tis("tfk8s_t_from_conf_poll5", r) if t["task_id"] == "train.wait")
            job = job_name("tfk8s_t_from_conf_poll5", r, "train")
            job_end = max(t for name, t in pods.ended.items() if pods.jobs.get(name) == job)
            polls.append((iso(sensor["end_date"]) - job_end) / interval)
        polls.sort()
        return {"mode": "concurrent", "jobs": jobs, "replicas_per_job": 8, "poll_interval_s": interval,
                "sensor_polls_after_end_max": polls[-1], "sensor_polls_after_end_median": polls[len(polls) // 2],
                "workers_ended_within_s": max(pods.ended.values()) - t_end}
    finally:
        cluster.drop(ns)


def stack_main(args: argparse.Namespace) -> None:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stopped: still stop the stack and drop its nodes
    cluster = Cluster()
    nodes = cluster.add_nodes()
    workdir = Path(tempfile.mkdtemp(prefix="tfk8s-bench-"))
    stack = Stack(cluster, workdir)
    rows = []
    try:
        stack_round(stack, 4)  # warm-up: bundle sync, imports, first connections (not reported)
        if args.concurrent:
            row = concurrent(stack, args.concurrent)
            print(json.dumps(row), flush=True)
            print(f"{args.concurrent} jobs x 8 replicas ending together: every sensor within "
                  f"{row['sensor_polls_after_end_max']:.2f} polls of its job's end (median "
                  f"{row['sensor_polls_after_end_median']:.2f}; target <= 2)", file=sys.stderr)
            return
        for replicas in ([args.replicas] if args.replicas else SIZES):
            row = stack_round(stack, replicas, tfjob=args.tfjob)
            rows.append(row)
            print(json.dumps({k: (round(v, 3) if isinstance(v, float) else v) for k, v in row.items()}), flush=True)
            if args.kueue:
                queued = stack_round(stack, replicas, kueue=row)
                print(json.dumps({k: (round(v, 3) if isinstance(v, float) else v) for k, v in queued.items()}),
                      flush=True)
                print(f"{replicas} replicas: all Running {row['running_s']:.2f} s without Kueue, "
                      f"{queued['running_s']:.2f} s with Kueue (admitted whole at {queued['admitted_s']:.2f} s)",
                      file=sys.stderr)
    finally:
        stack.close()
        cluster.remove_nodes(nodes)
    print(f"{'replicas':>8} {'running s':>10} {'floor s':>8} {'gated floor':>11} {'one task':>9} {'target':>7} "
          f"{'cpu s':>7} "
          f"{'done->sensor':>12} {'replicas done':>13} {'teardown':>9} {'requests':>9} {'LIST/poll':>9}",
          file=sys.stderr)
    for r in rows:
        target = 1.3 * r["floor_running_s"] + r["one_task_s"]
        print(f"{r['replicas']:>8} {r['running_s']:>10.2f} {r['floor_running_s']:>8.2f} "
              f"{r['floor_gated_running_s']:>11.2f} {r['one_task_s']:>9.2f} {target:>7.2f} {r['airflow_cpu_s']:>7.2f} "
              f"{r['done_to_sensor_s']:>12.2f} "
              f"{r['replica_tasks_done_s']:>13.2f} {r['teardown_s']:>9.2f} {r['api_requests']:>9} "
              f"{r['lists_per_poll']:>9.2f}", file=sys.stderr)
    if any("tfjob_running_s" in r for r in rows):
        print(f"{'replicas':>8} {'running s':>10} {'floor s':>8} {'TFJob s':>8} {'x floor':>8} {'TFJob QPS 100 s':>15} "
              f"{'x floor':>8}", file=sys.stderr)
        for r in rows:
            print(f"{r['replicas']:>8} {r['running_s']:>10.2f} {r['floor_running_s']:>8.2f} "
                  f"{r['tfjob_running_s']:>8.2f} {r['tfjob_ratio']:>8.2f} "
                  f"{r['tfjob_qps_running_s']:>15.2f} {r['tfjob_qps_ratio']:>8.2f}", file=sys.stderr)


# ------------------------------------------------------------------------------------- dag.test
def dagtest_main() -> None:
    import tests.fixtures.airflow  # noqa: F401  (AIRFLOW_HOME before airflow is imported)

    os.environ.update(devstack_env("k8s"))
    subprocess.run([str(Path(sys.executable).with_name("airflow")), "db", "migrate"], check=True,
                   capture_output=True)
    import tfk8s_scenarios

    cluster = Cluster()
    print(f"{'replicas':>8} {'start s':>9} {'floor s':>9} {'ratio':>7}")
    for replicas in (4, 16, 64):
        f = floor(cluster, replicas)
        ns = cluster.namespace()
        try:
            with PodTimes(cluster, ns) as pods:
                t0 = time.time()
                dr = tfk8s_scenarios.from_conf.test(run_conf={"namespace": ns, "spec": spec_dict(ns, replicas, "3s")})
                if str(dr.state) != "success":
                    raise SystemExit(f"benchmark run failed: {dr.state}")
                start = max(pods.running.values()) - t0
        finally:
            cluster.drop(ns)
        print(f"{replicas:>8} {start:>9.2f} {f['floor_running_s']:>9.2f} {start / f['floor_running_s']:>7.1f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--stack", action="store_true", help="the real scheduler stack (default)")
    mode.add_argument("--dagtest", action="store_true", help="dag.test() in this process")
    p.add_argument("--replicas", type=int, help="one size only")
    p.add_argument("--concurrent", type=int, help="N concurrent jobs of 8 replicas ending together")
    p.add_argument("--kueue", action="store_true",
                   help="also each size with queue: through Kueue (devstack/up kueue), side by side")
    p.add_argument("--tfjob", action="store_true",
                   help="also the same job through Kubeflow's training-operator (devstack/up tfjob), at its default "
                        "and at raised QPS")
    args = p.parse_args()
    if args.dagtest:
        dagtest_main()
    else:
        stack_main(args)


if __name__ == "__main__":
    main()
