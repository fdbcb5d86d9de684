"""Teardown's log archive against what a pod planted in the log directory, and against a retry.

The log directory is the host path of the job's ``logs`` volume, so the pods write into it:
a pod can put a symbolic link at ``<job>/<pod>.log`` (or make ``<job>`` a link) pointing at
a DAG file. Real teardown (``TFJobTeardownOperator.execute``) runs against the devstack API
server: the pods are on KWOK nodes with their own logs (KWOK ``Logs`` objects), the log
directory is on the real GlusterFS mount. A retried teardown sees the pods again while their
logs cannot be read (here: a pod without a ``tensorflow`` container, whose log the API server
refuses with HTTP 400, and a pod still held by a scheduling gate, whose log is empty) and
must keep what the first try archived.
"""
from __future__ import annotations

import time

import pytest
from kubernetes import client

from tests.fixtures.waiting import wait_until
from tfk8s_airflow.job.run.judge import JobPolicy
from tfk8s_airflow.job.run.records import JobRecord

pytestmark = [pytest.mark.k8s, pytest.mark.gluster, pytest.mark.airflow]

DAG_TEXT = "# a DAG file: the worker must never write here\n"


NO_POLICY = JobPolicy(replicas={}, tracked={}, restart_policy={}, success=(), max_restarts=0, schedule_timeout=60.0,
                     startup_timeout=60.0, active_deadline=None)


def _record(job: str, namespace: str) -> dict:
    return JobRecord(job=job, namespace=namespace, service=job, configmap=f"{job}-shards",
                     selector=f"tfk8s.io/job={job}", policy=NO_POLICY, replicas=(), created_at=time.time()).to_xcom()


def _pod(job: str, name: str, gated: bool = False, container: str = "tensorflow") -> client.V1Pod:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, labels={"tfk8s.io/job": job}),
        spec=client.V1PodSpec(restart_policy="Never",
                              scheduling_gates=[client.V1PodSchedulingGate(name="tfk8s.io/gang")] if gated else None,
                              containers=[client.V1Container(name=container, image="registry.invalid/t:1")]))


def _running_with_log(cluster, namespace: str, job: str, name: str, lines: list[str]) -> None:
    core = cluster.core_v1
    core.create_namespaced_pod(namespace, _pod(job, name))
    wait_until(lambda: core.read_namespaced_pod(name, namespace).status.phase == "Running", 60, f"{name} Running")
    cluster.set_pod_log(namespace, name, lines)

    def served() -> bool:  # KWOK picks the Logs object up asynchronously
        text = core.read_namespaced_pod_log(name, namespace, _preload_content=False).data.decode()
        return lines[-1] in text

    wait_until(served, 30, f"{name}'s own log")


def _teardown(job: str, namespace: str, archive_dir) -> dict:
    from tfk8s_airflow.operators.teardown import TFJobTeardownOperator

    op = TFJobTeardownOperator(task_id="teardown", job=_record(job, namespace), archive_dir=str(archive_dir),
                               grace_period_seconds=0, wait_timeout=60)
    return op.execute({})


def test_planted_links_are_not_written_through_and_a_retry_keeps_the_archive(
        k8s_cluster, k8s_namespace, gluster_dir, tmp_path):
    ns, core = k8s_namespace, k8s_cluster.core_v1
    dags = tmp_path / "dags"
    dags.mkdir()
    victim = dags / "retrain.py"
    victim.write_text(DAG_TEXT)
    logs = gluster_dir / "logs"
    (logs / "job-a").mkdir(parents=True)
    (logs / "job-a" / "job-a-worker-0.log").symlink_to(victim)  # the file itself is a link
    (logs / "job-b").symlink_to(dags)                            # the job's directory is a link

    _running_with_log(k8s_cluster, ns, "job-a", "job-a-worker-0", ["step 1 loss 0.9", "step 2 loss 0.4"])
    _running_with_log(k8s_cluster, ns, "job-b", "job-b-worker-0", ["import os  # the pod's own log"])
    _running_with_log(k8s_cluster, ns, "job-c", "job-c-worker-0", ["a first run: no log directory yet"])
    first = _teardown("job-a", ns, logs)
    _teardown("job-b", ns, logs)
    _teardown("job-c", ns, gluster_dir / "new" / "logs")
    assert (gluster_dir / "new" / "logs" / "job-c" / "job-c-worker-0.log").read_text().startswith("a first run")

    assert victim.read_text() == DAG_TEXT
    assert sorted(p.name for p in dags.iterdir()) == ["retrain.py"]
    archive = logs / "job-a" / "job-a-worker-0.log"
    assert not archive.is_symlink() and "step 2 loss 0.4" in archive.read_text()
    assert first["archived"] == [str(archive)]
    assert (logs / "job-b").is_symlink()  # refused, left as it was; the job was still deleted
    assert core.list_namespaced_pod(ns, label_selector="tfk8s.io/job in (job-a,job-b,job-c)").items == []

    # Retries: the job's pods are listed again but their logs cannot be read (HTTP 400), or are empty.
    core.create_namespaced_pod(ns, _pod("job-a", "job-a-worker-0", container="main"))
    core.create_namespaced_pod(ns, _pod("job-a", "job-a-ps-0", container="main"))
    _teardown("job-a", ns, logs)
    assert "step 2 loss 0.4" in archive.read_text(), archive.read_text()
    placeholder = (logs / "job-a" / "job-a-ps-0.log").read_text()  # nothing was archived for it before
    assert placeholder.startswith("<log unavailable: HTTP 400"), placeholder
    core.create_namespaced_pod(ns, _pod("job-a", "job-a-worker-0", gated=True))
    _teardown("job-a", ns, logs)
    assert "step 2 loss 0.4" in archive.read_text(), archive.read_text()
    assert victim.read_text() == DAG_TEXT
