"""``tfk8s_train_manual`` triggered through the REST API (scheduler + triggerer on PostgreSQL).

A good conf trains on the devstack's real node and evaluates; a bad conf (``workers: 0``) is refused by
the REST API and by ``airflow dags trigger -c`` with an error naming ``workers``, before a
run exists.
"""
from __future__ import annotations

import json
import time

import pytest

from tests.e2e._support import E2E_MARKS, ObjectRecorder, env_root, leftovers, publish, task_states, wait_gone

pytestmark = [*E2E_MARKS, pytest.mark.timeout(1500)]

DAG_ID = "tfk8s_train_manual"
PARTITION = "2026-02-01"


def _trigger(stack, conf):
    return stack.api.post(stack.url(f"api/v2/dags/{DAG_ID}/dagRuns"),
                          json={"logical_date": None, "conf": conf}, timeout=60)


def test_bad_conf_is_refused_by_rest_and_cli_without_a_run(airflow_stack):
    before = len(airflow_stack.dag_runs(DAG_ID))
    resp = _trigger(airflow_stack, {"workers": 0})
    assert resp.status_code == 400, resp.text
    detail = json.dumps(resp.json())
    assert "workers" in detail, detail

    res = airflow_stack.cli("dags", "trigger", DAG_ID, "-c", json.dumps({"workers": 0}), check=False)
    out = res.stdout + res.stderr
    assert res.returncode != 0, out[-3000:]
    assert "workers" in out, out[-3000:]
    assert len(airflow_stack.dag_runs(DAG_ID)) == before


def test_manual_trigger_through_rest_trains_and_cleans_up(airflow_stack, k8s_cluster, k8s_namespace):
    stack, core = airflow_stack, k8s_cluster.core_v1
    publish(stack.env, PARTITION)
    conf = {"namespace": k8s_namespace, "data_path": f"/data/clicks/dt={PARTITION}",
            "ps": 1, "workers": 2, "steps": 200, "learning_rate": 0.1}
    t0 = time.monotonic()
    with ObjectRecorder(core, k8s_namespace) as rec:
        resp = _trigger(stack, conf)
        assert resp.status_code in (200, 201), resp.text
        run = resp.json()
        assert run["conf"] == conf
        (done,) = stack.wait_for_runs(DAG_ID, [run["dag_run_id"]], timeout=900)
    elapsed = time.monotonic() - t0
    states = task_states(stack, DAG_ID, run["dag_run_id"])
    assert done["state"] == "success", states
    print(f"manual run {run['dag_run_id']}: {elapsed:.0f}s; memory MiB {stack.memory_mib()}")

    # The job ran the replicas the conf asked for, in the conf's namespace.
    pods = rec.of("pod")
    assert sorted(p.labels["tfk8s.io/role"] + "-" + p.labels["tfk8s.io/index"] for p in pods) == \
        ["ps-0", "worker-0", "worker-1"]
    assert len({p.labels["tfk8s.io/job"] for p in pods}) == 1
    # Each replica task is its replica's live view: its state, and its replica's own log.
    replicas = {t["map_index"]: t for t in stack.task_instances(DAG_ID, run["dag_run_id"])
                if t["task_id"] == "train.replica"}
    assert sorted(replicas) == [0, 1, 2] and all(t["state"] == "success" for t in replicas.values()), replicas
    logs = {mi: stack.task_log(DAG_ID, run["dag_run_id"], "train.replica", map_index=mi) for mi in replicas}
    assert "replica ps-0 of TF job" in logs[0] and "ps 0 serving at" in logs[0], logs[0][-2000:]
    assert "served until the job succeeded" in logs[0]  # the PS task succeeded after the job did
    for mi, me, other in ((1, "worker-0", "worker-1"), (2, "worker-1", "worker-0")):
        assert f"{me} done at global step" in logs[mi], logs[mi][-3000:]
        assert f"{other} done at global step" not in logs[mi]
    result = stack.xcom(DAG_ID, run["dag_run_id"], "evaluate")
    assert result["accuracy"] > 0.6, result
    key = "manual/" + run["dag_run_id"].replace(":", "-").replace("+", "-")
    model_dir = env_root(stack) / "models" / key
    assert (model_dir / "metrics.json").exists(), sorted(p.name for p in model_dir.parent.iterdir())
    assert json.loads((model_dir / "metrics.json").read_text())["final_step"] >= 200
    # The manual DAG never promotes.
    assert not (env_root(stack) / "serving" / "current.json").exists() or \
        all("manual" not in p.name for p in (env_root(stack) / "serving" / "versions").iterdir())
    assert wait_gone(core, k8s_namespace) == [], leftovers(core, k8s_namespace)
