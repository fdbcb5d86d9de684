"""Cancelling a staging task while its copy pods copy, through the real scheduler stack.

The DAG run is marked failed through the REST API while the task is deferred and its copy pods
are copying (real WebHDFS, GlusterFS and node agent pods). The real triggerer cancels the task's
trigger as a user action and calls its ``on_kill``, which deletes the pods: none is left, no
process of theirs runs, and nothing is published under the cache.
"""
from __future__ import annotations

import glob
import os
import time
from pathlib import Path

import pytest

from tests.e2e._support import task_states

pytestmark = [pytest.mark.k8s, pytest.mark.airflow, pytest.mark.hdfs, pytest.mark.timeout(600)]

MiB = 1 << 20
DAG_ID = "tfk8s_t_stage_pods_kubernetes"


def _wait(what: str, check, timeout: float, interval: float = 0.5):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(interval)
    pytest.fail(f"{what} within {timeout:.0f}s")


def test_a_dag_run_marked_failed_deletes_the_copy_pods_and_publishes_nothing(airflow_stack, k8s_cluster, hdfs_server,
                                                                           hdfs_dir, gluster_dir, nodeagent):
    stack, core, namespace = airflow_stack, k8s_cluster.core_v1, airflow_stack.staging_namespace
    client = hdfs_server.client()
    part = f"{hdfs_dir}/cancel-e2e/dt=2026-01-01"
    for i in range(12):  # 72 MiB in 4 MiB blocks: the pods are mid-copy for a while
        client.write(f"{part}/part-{i:05d}", data=os.urandom(6 * MiB), overwrite=True, blocksize=4 * MiB)
    cache = gluster_dir / "cancelled"
    resp = stack.api.post(stack.url(f"api/v2/dags/{DAG_ID}/dagRuns"), timeout=60, json={
        "logical_date": None, "conf": {"input": part, "cache": str(cache), "workers": 2}})
    assert resp.status_code in (200, 201), resp.text
    run_id = resp.json()["dag_run_id"]

    def verifying():  # a copy pod has verified part of its work, and the task is deferred on the pods
        journals = glob.glob(str(cache.parent / f".{cache.name}.tfk8s-parts-*" / "part-*.journal"))
        return (any(Path(j).read_text().count("\n") for j in journals)
                and task_states(stack, DAG_ID, run_id).get("stage") == "deferred")

    _wait("no copy pod verified anything while the task was deferred", verifying, 240, 0.3)
    pods = [p.metadata.name for p in core.list_namespaced_pod(namespace).items]
    assert pods and all(p.startswith("tfk8s-stage-") for p in pods), pods

    resp = stack.api.patch(stack.url(f"api/v2/dags/{DAG_ID}/dagRuns/{run_id}"), json={"state": "failed"}, timeout=60)
    assert resp.status_code == 200, resp.text

    _wait("copy pods left after the DAG run was marked failed",
          lambda: not core.list_namespaced_pod(namespace).items, 90)
    _wait("copy processes left after the cancel",
          lambda: not {k: p for k, p in nodeagent.pids(namespace).items() if Path(f"/proc/{p}").exists()}, 30)
    assert not cache.exists(), sorted(os.listdir(cache))  # nothing published, not even an empty cache
    assert task_states(stack, DAG_ID, run_id).get("stage") != "success"
    # The triggerer's own words, in the task's log: the user's action, then the trigger's on_kill.
    log = _wait("the trigger's on_kill in the task's log",
                lambda: (text := stack.task_log(DAG_ID, run_id, "stage")) and "deleted the copy pods" in text and text,
                60, 2)
    assert "Trigger cancelled by user action, invoking on_kill" in log
