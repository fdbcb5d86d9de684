"""Live replicas on the real scheduler stack (scheduler + triggerer + DAG processor + API server).

The group is created together and held by scheduling gates until every pod exists; each
replica task ends with its own pod's outcome (read through the REST API's task instances and
task logs, as the UI shows them); a killed scheduler (its task workers) and triggerer while the
replica tasks wait neither kill nor duplicate a replica. KWOK simulates the pods; the API
server, the scheduler and the gates are real.
"""
from __future__ import annotations

import time

import pytest

from tests.e2e._support import leftovers, task_states, wait_gone
from tests.fixtures.waiting import wait_until
from tests.podwatch import PodWatch

pytestmark = [pytest.mark.k8s, pytest.mark.airflow, pytest.mark.timeout(900)]


def trigger(stack, dag_id: str, conf: dict) -> str:
    resp = stack.api.post(stack.url(f"api/v2/dags/{dag_id}/dagRuns"),
                          json={"logical_date": None, "conf": conf}, timeout=60)
    assert resp.status_code in (200, 201), resp.text
    return resp.json()["dag_run_id"]


def replica_tis(stack, dag_id: str, run_id: str) -> dict[int, dict]:
    return {t["map_index"]: t for t in stack.task_instances(dag_id, run_id) if t["task_id"] == "train.replica"}


def test_sixteen_replicas_start_together_and_each_task_is_its_pod(airflow_stack, k8s_cluster, k8s_namespace):
    stack, core, dag = airflow_stack, k8s_cluster.core_v1, "tfk8s_t_gang"
    with PodWatch(core, k8s_namespace) as watch:
        run_id = trigger(stack, dag, {"namespace": k8s_namespace})
        (run,) = stack.wait_for_runs(dag, [run_id], timeout=600, interval=2)
    states = task_states(stack, dag, run_id)
    assert run["state"] == "success", states
    lives = list(watch.lives.values())
    assert len(lives) == 16, sorted(watch.lives)
    # Every pod was created held by the gate, and none was bound before the last one existed.
    assert all(life.gated_when_added for life in lives), [life.name for life in lives if not life.gated_when_added]
    last_added = max(life.added for life in lives)
    assert all(life.ungated is not None and life.ungated >= last_added for life in lives)
    assert all(life.bound is not None and life.bound >= last_added for life in lives)
    # Each replica task's final state is its pod's outcome: 15 workers exited 0, the PS served.
    tis = replica_tis(stack, dag, run_id)
    assert sorted(tis) == list(range(16))
    by_key = {life.key: life for life in lives}
    for map_index, ti in tis.items():
        result = stack.xcom(dag, run_id, "train.replica", "replica", map_index=map_index)
        life = by_key[result["key"]]
        assert result["pod"] == life.name
        assert ti["state"] == "success", (result, ti)
        if result["key"].startswith("worker-"):
            assert "Succeeded" in life.phases and result["exit_code"] == 0
        else:
            assert result["key"] == "ps-0" and "Succeeded" not in life.phases  # served until the end
    assert wait_gone(core, k8s_namespace) == [], leftovers(core, k8s_namespace)


def test_worker_exit_3_fails_its_own_task_with_its_log(airflow_stack, k8s_cluster, k8s_namespace):
    stack, core, dag = airflow_stack, k8s_cluster.core_v1, "tfk8s_t_exit3"
    logged: set[str] = set()
    with PodWatch(core, k8s_namespace) as watch:
        run_id = trigger(stack, dag, {"namespace": k8s_namespace})
        deadline = time.monotonic() + 120
        while len(logged) < 3 and time.monotonic() < deadline:  # each pod its own log, while it runs
            for name, pod in watch.pods.items():
                if name not in logged:
                    host = pod.spec.hostname
                    k8s_cluster.set_pod_log(k8s_namespace, name, [f"{host} step {i}" for i in range(50)]
                                            + [f"{host} fatal: bad input shard"])
                    logged.add(name)
            time.sleep(0.2)
        (run,) = stack.wait_for_runs(dag, [run_id], timeout=600, interval=2)
    states = task_states(stack, dag, run_id)
    assert run["state"] == "failed", states
    assert states["train.wait"] == "failed" and states["evaluate"] == "upstream_failed"
    assert states["train.teardown"] == "success"
    tis = replica_tis(stack, dag, run_id)
    keys = {mi: stack.xcom(dag, run_id, "train.replica", "replica", map_index=mi)["key"] for mi in tis}
    assert keys == {0: "ps-0", 1: "worker-0", 2: "worker-1"}
    # Both workers exit 3 six seconds after their own start. The first exit seen fails the job; a worker that KWOK
    # started a poll later may still run then, and its task ends skipped ("did not finish: the job failed"), the
    # judge's word for a replica the job's failure overtook. At least the one that failed the job fails its task.
    failed = [mi for mi in (1, 2) if tis[mi]["state"] == "failed"]
    assert failed, tis
    for mi in (1, 2):
        if mi not in failed:
            assert tis[mi]["state"] == "skipped", tis[mi]
            continue
        result = stack.xcom(dag, run_id, "train.replica", "replica", map_index=mi)
        assert result["exit_code"] == 3, result
        log = stack.task_log(dag, run_id, "train.replica", map_index=mi)
        host = keys[mi]
        assert f"replica {host} failed" in log and "exit code 3" in log, log[-3000:]
        assert f"{host} fatal: bad input shard" in log and f"{host} step 49" in log, log[-3000:]
        other = keys[3 - mi]
        assert f"{other} fatal" not in log  # its own replica's lines only
    assert tis[0]["state"] == "success"  # the PS was healthy when the job failed
    summary = stack.xcom(dag, run_id, "train.wait", "summary")
    assert "exit code 3" in summary["reason"], summary
    assert watch.lives and wait_gone(core, k8s_namespace) == [], leftovers(core, k8s_namespace)


def test_killed_scheduler_and_triggerer_neither_kill_nor_duplicate_replicas(airflow_stack, k8s_cluster,
                                                                           k8s_namespace):
    stack, core, dag = airflow_stack, k8s_cluster.core_v1, "tfk8s_t_slow"
    with PodWatch(core, k8s_namespace) as watch:
        run_id = trigger(stack, dag, {"namespace": k8s_namespace})
        wait_until(lambda: len(tis := replica_tis(stack, dag, run_id)) == 4
                   and all(t["state"] == "deferred" for t in tis.values()), 180, "every replica task deferred", 1,
                   on_fail=lambda: str(task_states(stack, dag, run_id)))
        running_before = {life.name for life in watch.lives.values()}
        stack.restart("scheduler")  # its LocalExecutor worker processes go with it
        stack.restart("triggerer")  # where the replica tasks wait
        (run,) = stack.wait_for_runs(dag, [run_id], timeout=600, interval=2)
    states = task_states(stack, dag, run_id)
    assert run["state"] == "success", states
    assert all(t["state"] == "success" for t in replica_tis(stack, dag, run_id).values()), states
    # Still one pod per replica: nothing recreated or duplicated, every worker ran to its end.
    assert {life.name for life in watch.lives.values()} == running_before and len(running_before) == 4
    workers = [life for life in watch.lives.values() if life.key.startswith("worker-")]
    assert all("Succeeded" in life.phases for life in workers)
    assert wait_gone(core, k8s_namespace) == [], leftovers(core, k8s_namespace)
