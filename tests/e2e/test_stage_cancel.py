"""What ends a staging task while its copy pods copy leaves nothing behind, through the real scheduler stack.

Each test starts the copy (real WebHDFS, GlusterFS, API server and pods on the real node), holds the copy
programs mid-part (SIGSTOP: the pods stay Running as long as the test needs, so no test races a fast copy),
then ends the task one way:

- the DAG run marked failed, the task marked success or cleared while the trigger runs: the triggerer cancels
  the trigger as a user action and its ``on_kill`` deletes the pods at once;
- the DAG run marked failed before the triggerer ever ran the trigger (the triggerer is stopped before the
  task defers: the race a fresh-clone CI run hit, made deterministic), or after the triggerer was killed: no
  ``on_kill`` runs. The task's lease (``[tfk8s] staging_lease``, 30 s on this stack) is no longer renewed;
  Kubernetes's Job controller ends it, its TTL controller deletes it and the garbage collector deletes the
  pods it owns.

Each ends with no pod, no lease, nothing running on the node (container, sandbox, copy program) and nothing
published; where the task runs again (clear,
or cleared after the cancel) it resumes and publishes. Without the lease, the two tests without a trigger
find the three copy pods still there after the bound (their only other bound is the pods' 6 h deadline).
"""
from __future__ import annotations

import contextlib
import glob
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.e2e._support import task_states

pytestmark = [pytest.mark.k8s, pytest.mark.airflow, pytest.mark.hdfs, pytest.mark.timeout(900)]

MiB = 1 << 20
DAG_ID = "tfk8s_t_stage_pods_kubernetes"
LEASE_S = 30  # the stack's [tfk8s] staging_lease (tests/fixtures/airflow_services.py)
#: The lease's bound, plus the controllers' reaction (the Job controller's sync, the TTL controller, the
#: garbage collector) and the kubelet's stop of the containers.
LEASE_BOUND_S = LEASE_S + 60


def _wait(what: str, check, timeout: float, interval: float = 0.5):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(interval)
    pytest.fail(f"{what} within {timeout:.0f}s")


@dataclass
class Copy:
    """One staging run whose copy pods are held mid-part."""

    stack: object
    k8s: object
    realnode: object
    run_id: str
    cache: Path
    namespace: str
    pids: dict

    def states(self) -> dict:
        return task_states(self.stack, DAG_ID, self.run_id)

    def pods(self) -> list[str]:
        return [p.metadata.name for p in self.k8s.core_v1.list_namespaced_pod(self.namespace).items]

    def leases(self) -> list[str]:
        from kubernetes import client

        jobs = client.BatchV1Api(self.k8s.api_client).list_namespaced_job(self.namespace).items
        return [j.metadata.name for j in jobs]

    def let_go(self) -> None:
        for pid in self.pids.values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)

    def mark_run(self, state: str) -> None:
        resp = self.stack.api.patch(self.stack.url(f"api/v2/dags/{DAG_ID}/dagRuns/{self.run_id}"),
                                    json={"state": state}, timeout=60)
        assert resp.status_code == 200, resp.text

    def assert_nothing_left(self, within: float) -> None:
        _wait("copy pods or their lease left", lambda: not self.pods() and not self.leases(), within, 1.0)
        self.realnode.assert_nothing_running(self.namespace, self.pids.values())
        assert not self.cache.exists(), sorted(os.listdir(self.cache))  # nothing published, not even the cache

    def trigger_runs(self) -> None:
        """The trigger has run: it renewed the lease (the Job's deadline raised past the first lease)."""
        from kubernetes import client

        def renewed():
            jobs = client.BatchV1Api(self.k8s.api_client).list_namespaced_job(self.namespace).items
            return any((j.spec.active_deadline_seconds or 0) > LEASE_S for j in jobs)

        _wait("the trigger renewing the lease", renewed, 120, 0.5)


@pytest.fixture
def start_copy(airflow_stack, k8s_cluster, hdfs_server, hdfs_dir, gluster_dir, realnode):
    """Start a copy of a fresh partition and hold its three pods' processes; let them go at the end."""
    stack, namespace = airflow_stack, airflow_stack.staging_namespace
    started: list[Copy] = []

    def start(name: str) -> Copy:
        client = hdfs_server.client()
        part = f"{hdfs_dir}/{name}/dt=2026-01-01"
        for i in range(6):  # 24 MiB in 4 MiB blocks
            client.write(f"{part}/part-{i:05d}", data=os.urandom(4 * MiB), overwrite=True, blocksize=4 * MiB)
        cache = gluster_dir / name
        resp = stack.api.post(stack.url(f"api/v2/dags/{DAG_ID}/dagRuns"), timeout=60, json={
            "logical_date": None, "conf": {"input": part, "cache": str(cache), "workers": 2}})
        assert resp.status_code in (200, 201), resp.text
        copy = Copy(stack, k8s_cluster, realnode, resp.json()["dag_run_id"], cache, namespace, {})
        started.append(copy)

        def held():  # every copy process running, and each stopped the moment it is seen
            for key, pid in realnode.pids(namespace).items():
                if key not in copy.pids and Path(f"/proc/{pid}").exists():
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGSTOP)
                        copy.pids[key] = pid
            return len(copy.pids) == 3 and copy.states().get("stage") == "deferred"

        _wait("three copy processes running while the task is deferred", held, 240, 0.2)
        assert all(p.startswith("tfk8s-stage-") for p in copy.pods()), copy.pods()
        assert copy.leases(), "the copy pods have no lease"
        return copy

    yield start
    for copy in started:
        copy.let_go()


@pytest.fixture
def no_triggerer(airflow_stack):
    """The stack's triggerer stopped (its whole process group) for the test; started again after it."""
    stack = airflow_stack
    proc = stack.procs["triggerer"]
    os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(Exception):
        proc.wait(60)
    try:
        yield
    finally:
        stack.restart("triggerer")


def _deferral_taken(copy: Copy, try_number: int) -> bool:
    """Whether the scheduler has taken the executor's word for try ``try_number`` of the stage task (its
    workload up to the deferral): the first "TaskInstance Finished" line the scheduler logs for that try."""
    text = Path(copy.stack.logs["scheduler"]).read_text(errors="replace")
    return any("TaskInstance Finished:" in line and f"run_id={copy.run_id}," in line and "task_id=stage," in line
               and f"try_number={try_number}," in line for line in text.splitlines())


def _rerun_publishes(copy: Copy) -> None:
    """Clearing the stage task runs it again: it starts clean (new pods, a new lease) and publishes.

    The new try's copy processes are held until the scheduler has processed the executor's report of that
    try's deferral. Airflow 3.3 fails a resumed task whose deferral the scheduler reads only after the resumed
    try started (apache/airflow#72716); a copy of a few MiB ends within a second or two, fast enough to hit
    it on a loaded machine. Real copies take minutes; the test waits for the scheduler instead of racing it.
    It waits for the new try's own report: a busy scheduler may read the earlier try's after the clear."""
    stack = copy.stack
    ti_url = stack.url(f"api/v2/dags/{DAG_ID}/dagRuns/{copy.run_id}/taskInstances/stage")
    ti = stack.api.get(ti_url, timeout=60)
    assert ti.status_code == 200, ti.text
    new_try = ti.json()["try_number"] + 1
    resp = stack.api.post(stack.url(f"api/v2/dags/{DAG_ID}/clearTaskInstances"), timeout=60, json={
        "dry_run": False, "task_ids": ["stage"], "dag_run_id": copy.run_id, "only_failed": False,
        "reset_dag_runs": True})
    assert resp.status_code == 200, resp.text
    held: dict[str, int] = {}

    def hold_until_drained():
        for key, pid in copy.realnode.pids(copy.namespace).items():
            if key not in held and pid not in copy.pids.values() and Path(f"/proc/{pid}").exists():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGSTOP)
                    held[key] = pid
        return _deferral_taken(copy, new_try)

    try:
        _wait("the scheduler processing the new try's deferral", hold_until_drained, 240, 0.2)
    finally:
        for pid in held.values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
    stack.wait_for_runs(DAG_ID, [copy.run_id], timeout=300, interval=2)
    assert copy.states().get("stage") == "success", copy.states()
    assert len(list(copy.cache.glob("part-*"))) == 6
    _wait("the re-run's pods and lease left", lambda: not copy.pods() and not copy.leases(), 60, 1.0)


def test_a_dag_run_marked_failed_while_the_trigger_runs_deletes_the_copy_pods_at_once(start_copy):
    copy = start_copy("cancel-running")
    copy.trigger_runs()
    copy.mark_run("failed")
    copy.assert_nothing_left(within=30)  # well before the lease could have run out
    assert copy.states().get("stage") != "success"
    log = _wait("the trigger's on_kill in the task's log",
                lambda: (text := copy.stack.task_log(DAG_ID, copy.run_id, "stage")) and "deleted the copy pods" in text
                and text, 60, 2)
    assert "Trigger cancelled by user action, invoking on_kill" in log


def test_a_dag_run_marked_failed_before_the_triggerer_runs_the_trigger_loses_its_pods_with_the_lease(
        start_copy, no_triggerer):
    copy = start_copy("cancel-before-trigger")
    copy.mark_run("failed")
    copy.let_go()  # the pods copy on: nothing of Airflow will delete them
    _wait("the task failed", lambda: copy.states().get("stage") == "failed", 60)
    copy.assert_nothing_left(within=LEASE_BOUND_S)
    # what the pods verified stays for a later try, hidden beside the cache
    assert glob.glob(str(copy.cache.parent / f".{copy.cache.name}.tfk8s-parts-*"))


def test_a_triggerer_killed_then_the_run_marked_failed_loses_its_pods_with_the_lease_and_a_rerun_publishes(
        start_copy, airflow_stack):
    copy = start_copy("cancel-killed-triggerer")
    copy.trigger_runs()
    proc = airflow_stack.procs["triggerer"]
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)
    try:
        copy.mark_run("failed")
        copy.let_go()
        copy.assert_nothing_left(within=LEASE_BOUND_S)
    finally:
        airflow_stack.restart("triggerer")
    _rerun_publishes(copy)


def test_the_task_marked_success_while_the_trigger_runs_deletes_the_pods_and_publishes_nothing(start_copy):
    copy = start_copy("cancel-success")
    copy.trigger_runs()
    stack = copy.stack
    resp = stack.api.patch(stack.url(f"api/v2/dags/{DAG_ID}/dagRuns/{copy.run_id}/taskInstances/stage"),
                           json={"new_state": "success"}, timeout=60)
    assert resp.status_code == 200, resp.text
    copy.assert_nothing_left(within=30)


def test_the_task_cleared_while_the_trigger_runs_starts_again_and_publishes(start_copy):
    copy = start_copy("cancel-clear")
    copy.trigger_runs()
    held = dict(copy.pids)
    _rerun_publishes(copy)  # the clear cancels the trigger (its on_kill deletes the held pods), the task runs again
    assert not [pid for pid in held.values() if Path(f"/proc/{pid}").exists()]  # the first try's processes are gone
    log = copy.stack.task_log(DAG_ID, copy.run_id, "stage", try_number=1)
    assert "deleted the copy pods" in log, log[-3000:]
