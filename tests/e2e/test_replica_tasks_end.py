"""Every replica task ends with its job, on the real scheduler stack, however the jobs start and end.

Many short jobs at once (``tfk8s_t_stress``): real pods on the devstack's real node whose programs print without
pause (the parameter servers and untracked workers forever, the tracked workers for a few seconds), with
and without log streaming and a TensorBoard, all started together and ending within seconds of each
other while their streams still carry output. Each replica task must end within a bound of its job's
verdict (the sensor's end), teardown must run, and nothing of any job may be left.

What this catches: a replica task's trigger that stops its log follower when its replica's outcome is
known, and a follower that does not stop when cancelled. On Python 3.11 ``asyncio.wait_for`` swallows a
cancellation that arrives in the loop iteration in which its read completes, so a follower reading a
stream that still carries output could outlive its cancellation; the trigger then waited for it forever,
its task stayed deferred, and (teardown then following the replica tasks) the parameter server and the
TensorBoard ran on. The bound here is far below teardown's ``replica_grace``, so a task that only ended
because teardown removed its pod fails the test too.

The second test kills the triggerer (SIGKILL, its trigger runner with it) while every replica task
waits in it: the tasks are picked up again by the restarted triggerer, end with their jobs, and
teardown runs.

The third kills a worker's program on the node (SIGKILL) while its replica task streams its log: the
kubelet restarts it in place (``restartPolicy: OnFailure``) and the streamed file holds both runs, each
whole and contiguous, with one separator line between them (the follower runs live in the triggerer,
as in production; with ``dag.test()`` the replica tasks run one after another, too late for this).
"""
from __future__ import annotations

import os
import re
import time
from datetime import datetime
from pathlib import Path

import pytest

from tests.e2e._support import E2E_MARKS, env_root, leftovers, task_states, wait_gone
from tests.fixtures.realnode import REAL_NODE_SELECTOR, REAL_NODE_TOLERATIONS
from tests.fixtures.waiting import wait_until
from tfk8s_airflow.operators.teardown import REPLICA_GRACE_S
from tfk8s_airflow.volume.logs import archive_path

pytestmark = [*E2E_MARKS, pytest.mark.timeout(1200)]

DAG_ID = "tfk8s_t_stress"
#: A replica's program: a line every 4 ms, for RUN_S seconds (0: until it is stopped).
PROGRAM = r"""
import os, sys, time
run, host, i = float(os.environ["RUN_S"]), os.environ.get("HOSTNAME", "?"), 0
end = time.time() + run
while run <= 0 or time.time() < end:
    sys.stdout.write(f"{host} line {i} " + "x" * 100 + "\n")
    sys.stdout.flush()
    i += 1
    time.sleep(0.004)
"""
#: Seconds within which every replica task must end after its job's sensor did: the log drain of a
#: replica that ended (10 s), a few polls and the triggerer recording many endings at once (measured here: 4-17 s
#: for six jobs ending together), below teardown's grace: a task that ended only because teardown removed its pod
#: fails.
BOUND_S = 50.0
assert BOUND_S < REPLICA_GRACE_S


def forever() -> dict:
    return {"env": {"RUN_S": "0"}}


def spec(name: str, namespace: str, root: Path, *, tf2: bool = False, stream: bool = True,
         tensorboard: bool = False, run_s: float = 4.0) -> dict:
    """One job of the stress: TF1 (a PS, two tracked workers) or TF2 (a chief; a PS and an untracked
    worker, both forever)."""
    roles: dict = ({"chief": {"replicas": 1, "env": {"RUN_S": str(run_s)}}, "ps": {"replicas": 1, **forever()},
                    "worker": {"replicas": 1, "tracked": False, **forever()}} if tf2 else
                   {"ps": {"replicas": 1, **forever()}, "worker": {"replicas": 2, "env": {"RUN_S": str(run_s)}}})
    out: dict = {"name": name, "namespace": namespace, "image": os.environ["TFK8S_TRAINING_IMAGE"],  # realnode's
                 "node_selector": REAL_NODE_SELECTOR, "tolerations": REAL_NODE_TOLERATIONS,
                 "command": ["python", "-u", "-c", PROGRAM], "restart_policy": "Never",
                 "env": {"PYTHONUNBUFFERED": "1"}, "volumes": [], **roles}
    if stream:  # the job's log directory: each replica task streams its replica's whole log there
        (root / name / "logs").mkdir(parents=True, exist_ok=True)
        out["volumes"].append({"name": "logs", "mount_path": "/logs", "host_path": str(root / name / "logs")})
    if tensorboard:
        (root / name / "model").mkdir(parents=True, exist_ok=True)
        out["volumes"].append({"name": "model", "mount_path": "/model", "host_path": str(root / name / "model")})
        out["tensorboard"] = {"enabled": True}
    return out


def trigger(stack, conf: dict) -> str:
    resp = stack.api.post(stack.url(f"api/v2/dags/{DAG_ID}/dagRuns"), json={"logical_date": None, "conf": conf},
                          timeout=60)
    assert resp.status_code in (200, 201), resp.text
    return resp.json()["dag_run_id"]


def when(value: str | None) -> float:
    assert value, "a task instance without an end date"
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def ended_with_their_job(stack, run_id: str) -> dict[str, float]:
    """Seconds from the sensor's end to each replica task's end; asserts every task and the run succeeded."""
    tis = stack.task_instances(DAG_ID, run_id)
    states = task_states(stack, DAG_ID, run_id)
    assert all(t["state"] == "success" for t in tis), states
    sensor = next(t for t in tis if t["task_id"] == "train.wait")
    teardown = next(t for t in tis if t["task_id"] == "train.teardown")
    lags = {f"replica[{t['map_index']}]": when(t["end_date"]) - when(sensor["end_date"])
            for t in tis if t["task_id"] == "train.replica"}
    assert lags, states
    assert when(teardown["start_date"]) >= when(sensor["end_date"]) - 1.0, (teardown, sensor)
    return lags


def test_many_jobs_ending_together_end_every_replica_task(airflow_stack, k8s_cluster, k8s_namespace):
    stack, core = airflow_stack, k8s_cluster.core_v1
    root = env_root(stack) / "stress"
    jobs = {"a0": {}, "a1": {}, "b0": {"tf2": True}, "b1": {"tf2": True}, "c0": {"stream": False},
            "d0": {"tensorboard": True}}
    runs = {name: trigger(stack, {"namespace": k8s_namespace, "spec": spec(f"st-{name}", k8s_namespace, root, **kw)})
            for name, kw in jobs.items()}
    done = stack.wait_for_runs(DAG_ID, list(runs.values()), timeout=900, interval=3)
    assert all(r["state"] == "success" for r in done), {r["dag_run_id"]: task_states(stack, DAG_ID, r["dag_run_id"])
                                                         for r in done}
    lags = {name: ended_with_their_job(stack, run_id) for name, run_id in runs.items()}
    for name, run_id in runs.items():  # teardown took the sensor's verdict before it deleted anything
        job = stack.xcom(DAG_ID, run_id, "train.setup", "job")["job"]
        log = stack.task_log(DAG_ID, run_id, "train.teardown")
        assert f"job {job}: succeeded (success policy met" in log, (name, log[-3000:])
    print("seconds from each job's verdict to its replica tasks' ends:",
          {name: sorted(round(v, 1) for v in lag.values()) for name, lag in lags.items()})
    late = {name: {k: round(v, 1) for k, v in lag.items() if v > BOUND_S} for name, lag in lags.items()}
    assert not any(late.values()), ("replica tasks ended too long after their job's verdict", late, lags)
    # Each streamed job has every replica's whole log, beyond the program's first lines.
    for name, kw in jobs.items():
        if kw.get("stream", True):
            job = stack.xcom(DAG_ID, runs[name], "train.setup", "job")["job"]
            logs_dir = root / f"st-{name}" / "logs"
            for key in ("ps-0", "worker-0") if not kw.get("tf2") else ("ps-0", "chief-0", "worker-0"):
                path = archive_path(str(logs_dir), job, f"{job}-{key}")
                assert path.is_file() and path.stat().st_size > 10_000, (name, key, path)
    assert wait_gone(core, k8s_namespace) == [], leftovers(core, k8s_namespace)


def test_a_killed_triggerer_leaves_no_replica_task_waiting(airflow_stack, k8s_cluster, k8s_namespace):
    stack, core = airflow_stack, k8s_cluster.core_v1
    root = env_root(stack) / "stress-kill"
    runs = [trigger(stack, {"namespace": k8s_namespace,
                            "spec": spec(f"sk-{i}", k8s_namespace, root, tf2=bool(i % 2), run_s=40)})
            for i in range(2)]
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        tis = [t for run_id in runs for t in stack.task_instances(DAG_ID, run_id) if t["task_id"] == "train.replica"]
        if len(tis) == 6 and all(t["state"] == "deferred" for t in tis):
            break
        time.sleep(1)
    else:
        pytest.fail(f"replica tasks never all deferred: {[task_states(stack, DAG_ID, r) for r in runs]}")
    stack.restart("triggerer")  # SIGKILL to its process group: the trigger runner and every trigger with it
    done = stack.wait_for_runs(DAG_ID, runs, timeout=600, interval=3)
    assert all(r["state"] == "success" for r in done), [task_states(stack, DAG_ID, r) for r in runs]
    for run_id in runs:
        lags = ended_with_their_job(stack, run_id)
        assert all(lag <= BOUND_S for lag in lags.values()), lags
    assert wait_gone(core, k8s_namespace) == [], leftovers(core, k8s_namespace)


def _runs_of(lines: list[str]) -> list[int]:
    """The counters of the program's lines, in file order."""
    pattern = re.compile(r"\S+ line (\d+) x+")
    return [int(m.group(1)) for line in lines if (m := pattern.fullmatch(line))]


def test_a_worker_restarted_in_place_is_streamed_whole_with_a_separator(airflow_stack, k8s_cluster, k8s_namespace,
                                                                         realnode):
    """worker-0 is SIGKILLed on the node while its replica task follows its log; the kubelet restarts it in
    place (OnFailure, exit 137); the file holds the first run from its first line to the kill, one separator,
    then the second run whole."""
    stack, core = airflow_stack, k8s_cluster.core_v1
    root = env_root(stack) / "restart-stream"
    job_spec = spec("rs", k8s_namespace, root, run_s=20)
    job_spec.update(restart_policy="OnFailure", max_restarts=2,
                    worker={"replicas": 1, "env": {"RUN_S": "20"}})
    job_spec.pop("ps")
    run_id = trigger(stack, {"namespace": k8s_namespace, "spec": job_spec})

    def worker_logging():
        for p in core.list_namespaced_pod(k8s_namespace, label_selector="tfk8s.io/job").items:
            if p.metadata.name.endswith("-worker-0") and p.status.phase == "Running":
                text = core.read_namespaced_pod_log(p.metadata.name, k8s_namespace, container="tensorflow",
                                                    _preload_content=False).data.decode()
                return p.metadata.name if text.count("\n") >= 300 else None
        return None
    pod = wait_until(worker_logging, 300, "worker-0 running and logging 300 lines", interval=0.5)
    killed = realnode.kill(k8s_namespace, pod, "tensorflow")
    [done] = stack.wait_for_runs(DAG_ID, [run_id], timeout=600, interval=3)
    assert done["state"] == "success", task_states(stack, DAG_ID, run_id)
    summary = stack.xcom(DAG_ID, run_id, "train.wait", "summary")
    assert summary["replicas"]["worker-0"]["restarts"] == 1, summary
    job = stack.xcom(DAG_ID, run_id, "train.setup", "job")["job"]
    path = archive_path(str(root / "rs" / "logs"), job, f"{job}-worker-0")
    lines = path.read_text().splitlines()
    seps = [i for i, line in enumerate(lines) if line.startswith("--- ")]
    assert len(seps) == 1 and lines[seps[0]].startswith(f"--- {pod}: container restart 1 ("), (
        killed, [lines[i] for i in seps])
    first, second = _runs_of(lines[:seps[0]]), _runs_of(lines[seps[0] + 1:])
    # Each run whole and contiguous: its counter from 0, one step at a time, nothing else between.
    assert first == list(range(len(first))) and len(first) >= 300, (first[:3], first[-3:], len(first))
    assert second == list(range(len(second))) and len(second) > 1000, (second[:3], second[-3:], len(second))
    assert len(first) + len(second) + 1 == len(lines), "lines other than the program's in the streamed file"
    assert wait_gone(core, k8s_namespace) == [], leftovers(core, k8s_namespace)
    realnode.assert_nothing_running(k8s_namespace)
