"""Launch and completion latency of a tf_job group vs. creating the same objects directly.

For 4, 16 and 64 replicas (1 PS + workers on the devstack's KWOK nodes, workers
succeeding 3 s after they run), measured side by side in one run:

* start: from the start of the DAG run to every replica Running, versus the floor:
  POSTing the same Service and pods straight to the API server and polling until
  every pod runs;
* finish: from the last tracked replica finishing (its container's finishedAt) to
  the sensor task succeeding (success_policy all_workers, so every worker
  counts), versus the floor: a direct LIST loop noticing the same completion.

dag.test() runs tasks one at a time, so the start ratio includes Airflow's
per-task overhead for every mapped launch; a scheduler with parallel workers
overlaps them. Run: .venv/bin/python benchmarks/launch.py (devstack k8s must be up).
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import uuid
from datetime import UTC
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "dags"))
import tests.fixtures.airflow  # noqa: E402,F401  (AIRFLOW_HOME before airflow is imported)

POLL = 0.05


def env_from_devstack() -> None:
    out = subprocess.run([str(REPO / "devstack" / "env"), "k8s"], capture_output=True, text=True,
                         check=True).stdout
    for line in out.splitlines():
        if line.startswith("export "):
            name, _, value = line[7:].partition("=")
            import shlex
            os.environ[name] = shlex.split(value)[0]


def spec_dict(namespace: str, replicas: int) -> dict:
    return {"name": "bench", "namespace": namespace, "image": "tfk8s/trainer:0.1",
            "node_selector": {"type": "kwok"}, "ps": 1, "success_policy": "all_workers",
            "worker": {"replicas": replicas - 1,
                       "annotations": {"tfk8s.io/sim-duration": "3s", "tfk8s.io/sim-exit-code": "0"}}}


def watch(core, namespace: str, n: int, stop: threading.Event, marks: dict) -> None:
    while not stop.is_set():
        pods = core.list_namespaced_pod(namespace).items
        running = sum(1 for p in pods if p.status.phase in ("Running", "Succeeded"))
        if running == n and "all_running" not in marks:
            marks["all_running"] = time.time()
        time.sleep(POLL)


def finished_at(pods) -> float:
    last = 0.0
    for p in pods:
        for cs in p.status.container_statuses or []:
            if cs.state and cs.state.terminated:
                last = max(last, cs.state.terminated.finished_at.replace(tzinfo=UTC).timestamp())
    return last


def floor(core, namespace: str, replicas: int) -> tuple[float, float]:
    from tfk8s_airflow.job.objects import JobNames, job_manifests
    from tfk8s_airflow.job.spec import TFJobSpec
    spec = TFJobSpec.from_dict(spec_dict(namespace, replicas))
    names = JobNames.for_run(spec, uuid.uuid4().hex)
    t0 = time.time()
    for obj in job_manifests(spec, names):
        (core.create_namespaced_pod if obj["kind"] == "Pod" else core.create_namespaced_service)(namespace, obj)
    while True:
        pods = core.list_namespaced_pod(namespace, label_selector=names.selector).items
        if sum(p.status.phase in ("Running", "Succeeded") for p in pods) == replicas:
            break
        time.sleep(POLL)
    start = time.time() - t0
    while True:
        pods = core.list_namespaced_pod(namespace, label_selector=names.selector).items
        if sum(p.status.phase == "Succeeded" for p in pods) == replicas - 1:
            seen = time.time()
            break
        time.sleep(POLL)
    finish = seen - finished_at(pods)
    core.delete_collection_namespaced_pod(namespace, label_selector=names.selector, grace_period_seconds=0)
    core.delete_namespaced_service(names.service, namespace)
    return start, finish


def with_airflow(core, namespace: str, replicas: int) -> tuple[float, float]:
    import tfk8s_scenarios
    marks: dict = {}
    stop = threading.Event()
    thread = threading.Thread(target=watch, args=(core, namespace, replicas, stop, marks), daemon=True)
    thread.start()
    last_finish = [0.0]

    def record_finish():
        while not stop.is_set():
            pods = core.list_namespaced_pod(namespace).items
            f = finished_at(pods)
            if f:
                last_finish[0] = max(last_finish[0], f)
            time.sleep(POLL)
    t2 = threading.Thread(target=record_finish, daemon=True)
    t2.start()
    t0 = time.time()
    dr = tfk8s_scenarios.from_conf.test(run_conf={"namespace": namespace, "spec": spec_dict(namespace, replicas)})
    stop.set()
    thread.join()
    t2.join()
    if str(dr.state) != "success":
        raise SystemExit(f"benchmark run failed: {dr.state}")
    wait_ti = next(t for t in dr.get_task_instances() if t.task_id == "train.wait")
    sensor_done = wait_ti.end_date.timestamp()
    return marks["all_running"] - t0, sensor_done - last_finish[0]


def main() -> None:
    env_from_devstack()
    subprocess.run([str(Path(sys.executable).with_name("airflow")), "db", "migrate"], check=True,
                   capture_output=True)
    from kubernetes import client, config
    core = client.CoreV1Api(config.new_client_from_config(os.environ["KUBECONFIG"]))
    warm = f"bench-{uuid.uuid4().hex[:8]}"  # first dag.test() pays for bundle sync and imports
    core.create_namespace({"metadata": {"name": warm}})
    try:
        with_airflow(core, warm, 2)
    finally:
        core.delete_namespace(warm)
    print(f"{'replicas':>8} {'start s':>9} {'floor s':>9} {'ratio':>7} {'finish s':>9} {'floor s':>9}")
    for replicas in (4, 16, 64):
        ns = f"bench-{uuid.uuid4().hex[:8]}"
        core.create_namespace({"metadata": {"name": ns}})
        try:
            f_start, f_finish = floor(core, ns, replicas)
            a_start, a_finish = with_airflow(core, ns, replicas)
        finally:
            core.delete_namespace(ns)
        print(f"{replicas:>8} {a_start:>9.2f} {f_start:>9.2f} {a_start / f_start:>7.1f} "
              f"{a_finish:>9.2f} {f_finish:>9.2f}")
    print("finish: sensor poll_interval is 1 s in this DAG; the floor polls every 50 ms")


if __name__ == "__main__":
    main()
