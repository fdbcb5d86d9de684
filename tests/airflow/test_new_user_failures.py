"""What a new user hit: failures that were slow or said the wrong thing (devstack KWOK, dag.test()).

A missing namespace fails setup once, permanently, and so do pods too big for recovery's copy
of them, before anything is created; a job without a deadline ends at the
deployment's default; the sensor says what it waits for at least every interval, not only on a
change, and for a Pending replica how long it has waited, why and until which timeout; a program
landing on a simulated (KWOK) node is pointed out.
"""
from __future__ import annotations

import asyncio
import re
import time

import pytest

from tests.airflow.test_tfjob_k8s import leftovers, run_dag
from tests.dagrun import states, xcom
from tests.podwatch import PodWatch

pytestmark = [pytest.mark.k8s, pytest.mark.airflow]


def test_missing_namespace_fails_setup_once_naming_it(k8s_cluster, k8s_namespace, airflow_db):
    spec = {"name": "nons", "namespace": "no-such-namespace-7f3", "image": "tfk8s/trainer:0.1", "worker": 1}
    dr = run_dag("tfk8s_t_from_conf", k8s_namespace, spec=spec)
    st = states(dr)
    assert dr.state == "failed" and st[("train.setup", -1)] == "failed", st
    ti = next(t for t in dr.get_task_instances() if t.task_id == "train.setup")
    assert ti.try_number == 1  # a Kubernetes 404 is permanent: setup is not retried (retries=2)


def test_pods_too_big_for_recoverys_configmap_fail_setup_once_before_anything_is_created(
        k8s_cluster, k8s_namespace, airflow_db, monkeypatch, capsys):
    # No real spec of <= 512 replicas outgrows the ConfigMap once xz-compressed (512 replicas: ~10 KB); the
    # bound is lowered here, in this process (dag.test() runs setup in it), so a 3-replica job exceeds it.
    from tfk8s_airflow.job.builders import templatemap

    monkeypatch.setattr(templatemap, "CONFIGMAP_MAX_BYTES", 64 * 1024 + 100)
    spec = {"name": "big", "namespace": k8s_namespace, "image": "tfk8s/trainer:0.1", "ps": 1, "worker": 2}
    capsys.readouterr()
    dr = run_dag("tfk8s_t_from_conf", k8s_namespace, spec=spec)
    out = capsys.readouterr().out  # setup's task log, as dag.test() prints it
    st = states(dr)
    assert dr.state == "failed" and st[("train.setup", -1)] == "failed", st
    ti = next(t for t in dr.get_task_instances() if t.task_id == "train.setup")
    assert ti.try_number == 1  # a SpecError is permanent: setup is not retried
    assert "replicas: the job's 3 pod manifests take" in out and "fix: fewer replicas" in out, out[-3000:]
    assert leftovers(k8s_cluster.core_v1, k8s_namespace) == []  # refused before the Service or any pod


def test_job_without_a_deadline_ends_at_the_deployment_default(k8s_cluster, k8s_namespace, airflow_db,
                                                               monkeypatch):
    monkeypatch.setenv("AIRFLOW__TFK8S__DEFAULT_ACTIVE_DEADLINE", "8s")
    with PodWatch(k8s_cluster.core_v1, k8s_namespace) as watch:
        dr = run_dag("tfk8s_t_forever", k8s_namespace)  # a PS and a worker that never end
    assert dr.state == "failed", states(dr)
    reason = xcom(dr, "train.wait", "summary")["reason"]
    assert "active_deadline of 8s passed" in reason and "worker-0 Running" in reason, reason
    assert {p.spec.active_deadline_seconds for p in watch.pods.values()} == {8}  # Kubernetes bounds it too
    assert leftovers(k8s_cluster.core_v1, k8s_namespace) == []


def _job(core, namespace, command, node_type="kwok"):
    from tests.fixtures.k8s import create_service_and_pods
    from tests.fixtures.waiting import wait_until
    from tfk8s_airflow.job.builders.objects import JobNames
    from tfk8s_airflow.job.builders.plan import plan_job
    from tfk8s_airflow.job.policy import DeploymentPolicy
    from tfk8s_airflow.job.run.judge import JobPolicy
    from tfk8s_airflow.job.run.resolve import job_record
    from tfk8s_airflow.job.spec import parse_spec

    raw = {"name": "talk", "namespace": namespace, "image": "tfk8s/trainer:0.1", "node_selector": {"type": node_type},
           "ps": 1, "worker": 1}
    if command:
        raw["command"] = ["python", "train.py"]
    spec = parse_spec(raw)
    names = JobNames.for_run(spec, "talk-1")
    plan = plan_job(spec, names, DeploymentPolicy())
    create_service_and_pods(core, plan)
    if node_type == "kwok":
        wait_until(lambda: sum(p.status.phase == "Running" for p in core.list_namespaced_pod(namespace).items) == 2,
                 60, "2 pods Running")
    else:  # no node has the label: the real scheduler marks both pods Unschedulable
        wait_until(lambda: sum(any(c.reason == "Unschedulable" for c in (p.status.conditions or []))
                             for p in core.list_namespaced_pod(namespace).items) == 2, 60, "2 pods Unschedulable")
    return job_record(spec, names, plan.replicas, policy=JobPolicy.from_spec(spec),
                      has_shards=False, kubernetes_conn_id="kubernetes_default", poll_interval=0.2)


async def _run_for(trigger, seconds):
    task = asyncio.ensure_future(trigger.run().__anext__())
    await asyncio.sleep(seconds)
    assert not task.done(), "the job is still running: the trigger must not fire"
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


def test_sensor_says_what_it_waits_for_at_every_interval_and_names_simulated_nodes(
        k8s_cluster, k8s_namespace, airflow_db, monkeypatch, capsys):
    from tfk8s_airflow.triggers import job as jobtriggers

    record = _job(k8s_cluster.core_v1, k8s_namespace, command=True)
    monkeypatch.setattr(jobtriggers, "WAITING_LOG_INTERVAL_S", 0.5)
    capsys.readouterr()
    t0 = time.monotonic()
    asyncio.run(_run_for(jobtriggers.TFJobTrigger(job=record.to_xcom()), 3.0))
    elapsed = time.monotonic() - t0
    lines = capsys.readouterr().out.splitlines()  # the triggers' log, as the task log gets it
    waiting = [line for line in lines if "waiting for worker-0 Running on kwok-node-" in line]
    # Nothing changed while it ran, yet it said so about every 0.5 s (not only once, on the change).
    assert len(waiting) >= 3, lines
    assert len(waiting) <= elapsed / 0.5 + 2
    simulated = [line for line in lines if "simulated (KWOK) node" in line]
    assert len(simulated) == 2 and all("does not really run" in m for m in simulated), simulated


def test_sensor_says_how_long_pending_replicas_waited_for_what_and_until_when(
        k8s_cluster, k8s_namespace, airflow_db, monkeypatch, capsys):
    from tfk8s_airflow.triggers import job as jobtriggers

    record = _job(k8s_cluster.core_v1, k8s_namespace, command=True, node_type="no-such-node-type")
    monkeypatch.setattr(jobtriggers, "WAITING_LOG_INTERVAL_S", 0.5)
    capsys.readouterr()
    asyncio.run(_run_for(jobtriggers.TFJobTrigger(job=record.to_xcom()), 3.0))
    lines = capsys.readouterr().out.splitlines()
    pending = [m for m in (re.search(r"(\w+-0) Pending for (\d+)s \(2 replicas Pending\), Unschedulable: (.*); "
                                     r"the job fails at schedule_timeout 300s", line) for line in lines) if m]
    assert len(pending) >= 3, lines  # on every periodic line, not only on a change
    assert all("0/" in m[3] and "node" in m[3] for m in pending), [m[3] for m in pending]  # the scheduler's words
    waited = [int(m[2]) for m in pending]
    assert waited == sorted(waited) and len({m[1] for m in pending}) == 1, pending  # one replica, a growing wait


def test_no_simulated_node_warning_without_a_command(k8s_cluster, k8s_namespace, airflow_db, capsys):
    from tfk8s_airflow.triggers.job import TFJobTrigger

    record = _job(k8s_cluster.core_v1, k8s_namespace, command=False)  # KWOK's own simulation: expected
    capsys.readouterr()
    asyncio.run(_run_for(TFJobTrigger(job=record.to_xcom()), 1.5))
    out = capsys.readouterr().out
    assert "waiting for worker-0" in out and "simulated (KWOK) node" not in out
