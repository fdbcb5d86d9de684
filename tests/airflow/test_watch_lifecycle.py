"""The shared watch of a job against a real API server: it outlives what stops it, and nothing after a verdict.

* A watch whose loop stopped (as one ended by an error no handler expected did) is started again by
  the first subscriber that waited ``stale_after`` seconds for a snapshot: the sensor's and every
  replica task's trigger still end with the job. The bound is shortened for the test
  (``STALE_MIN_S``); the loop is stopped by cancelling its task, the one way to stop it on purpose.
* Once a watch has the job's verdict it lists the pods no more, while it still answers subscribers.
* A verdict on the job's Service stops recovery: a worker evicted after it is not replaced (a watch
  running while teardown deletes the pods must not take the deletions for lost replicas), and the job
  ends failed, naming the recorded verdict. KWOK pods, dag.test(), the real Eviction API.
"""
from __future__ import annotations

import asyncio
import json
import time

import pytest

from tests.airflow.test_recovery_kwok import in_background
from tests.airflow.test_recovery_kwok import spec as recovery_spec
from tests.airflow.test_tfjob_k8s import leftovers, run_dag
from tests.dagrun import states, xcom
from tests.fixtures.k8s import create_service_and_pods
from tests.fixtures.waiting import wait_until
from tests.podwatch import PodWatch
from tfk8s_airflow.job.builders.objects import JobNames
from tfk8s_airflow.job.builders.plan import plan_job
from tfk8s_airflow.job.policy import DeploymentPolicy
from tfk8s_airflow.job.run.judge import JobPolicy
from tfk8s_airflow.job.run.resolve import job_record
from tfk8s_airflow.job.run.verdict import verdict_body
from tfk8s_airflow.job.spec import parse_spec
from tfk8s_airflow.job.states import JobState
from tfk8s_airflow.k8s import watch as kwatch
from tfk8s_airflow.triggers.job import TFJobTrigger, TFReplicaTrigger

pytestmark = [pytest.mark.k8s, pytest.mark.airflow]


def create_job(core, namespace: str, run: str, worker_s: int):
    """A PS and two workers on KWOK (the workers exit 0 after ``worker_s`` seconds); its record."""
    spec = parse_spec({"name": "life", "namespace": namespace, "image": "tfk8s/trainer:0.1",
                                "node_selector": {"type": "kwok"}, "ps": 1,
                                "worker": {"replicas": 2, "annotations": {"tfk8s.io/sim-duration": f"{worker_s}s",
                                                                           "tfk8s.io/sim-exit-code": "0"}}})
    names = JobNames.for_run(spec, run)
    plan = plan_job(spec, names, DeploymentPolicy())
    create_service_and_pods(core, plan)
    wait_until(lambda: sum(p.status.phase == "Running" for p in core.list_namespaced_pod(namespace).items) == 3,
             120, "3 pods Running")
    return job_record(spec, names, plan.replicas, policy=JobPolicy.from_spec(spec), has_shards=False,
                      kubernetes_conn_id="kubernetes_default", poll_interval=0.5)


def test_a_watch_whose_loop_stopped_is_started_again_and_every_trigger_ends_with_the_job(
        k8s_cluster, k8s_namespace, airflow_db, monkeypatch):
    monkeypatch.setattr(kwatch, "STALE_MIN_S", 2.0)
    record = create_job(k8s_cluster.core_v1, k8s_namespace, "stopped", worker_s=10)

    async def scenario() -> tuple[list, int]:
        job = record.to_xcom()
        triggers = [TFJobTrigger(job=job)] + [TFReplicaTrigger(job=job, replica=r.key) for r in record.replicas]
        tasks = [asyncio.ensure_future(t.run().__anext__()) for t in triggers]
        deadline = time.monotonic() + 60
        watch = None
        while (watch is None or watch.latest is None) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
            watch = next(iter(kwatch._WATCHES.values()), None)
        assert watch is not None and watch.latest is not None and watch.latest.status.state == JobState.RUNNING
        loop = watch._task
        loop.cancel()  # the loop is gone, as if an error had ended it
        await asyncio.wait({loop})
        events = await asyncio.wait_for(asyncio.gather(*tasks), 120)
        return events, watch.restarts

    events, restarts = asyncio.run(scenario())
    assert restarts >= 1
    outcomes = [e.payload for e in events]
    assert [o["state"] for o in outcomes] == ["succeeded"] * 4, outcomes
    assert not kwatch._WATCHES


def test_a_watch_with_the_verdict_lists_no_more(k8s_cluster, k8s_namespace, airflow_db):
    record = create_job(k8s_cluster.core_v1, k8s_namespace, "latched", worker_s=3)

    async def scenario() -> tuple[int, int, int, int]:
        async with kwatch.watch_job(record, interval=0.2) as watch:
            async for snap in watch.snapshots():
                if snap.status is not None and snap.status.state != JobState.RUNNING:
                    break
            lists, seq = watch.lists, snap.seq
            await asyncio.sleep(2.0)  # ten polls
            later = await watch.next(watch.latest.seq)
            return lists, watch.lists, seq, later.seq

    lists, after, seq, later = asyncio.run(asyncio.wait_for(scenario(), 120))
    assert after == lists, (lists, after)  # no LIST once the verdict was known
    assert later > seq  # still answering subscribers


def test_a_verdict_on_the_service_stops_recovery(k8s_cluster, k8s_namespace, airflow_db):
    from kubernetes import client

    core = k8s_cluster.core_v1
    doc = recovery_spec(k8s_namespace, infra_restarts=3, worker={"annotations": {"tfk8s.io/sim-duration": "30s"}})
    with PodWatch(core, k8s_namespace) as watch:
        def end_then_evict():
            life = watch.wait_for(lambda p: p.key == "worker-1" and "Running" in p.phases, what="running worker-1")
            svc = next(s for s in core.list_namespaced_service(k8s_namespace, label_selector="tfk8s.io/job").items)
            core.patch_namespaced_service(svc.metadata.name, k8s_namespace,
                                          verdict_body("ended", "torn down by the test", "teardown"))
            core.create_namespaced_pod_eviction(life.name, k8s_namespace, client.V1Eviction(
                metadata=client.V1ObjectMeta(name=life.name, namespace=k8s_namespace)))
        join = in_background(end_then_evict)
        dr = run_dag("tfk8s_t_from_conf", k8s_namespace, spec=doc)
        join()
    assert dr.state == "failed", states(dr)
    summary = xcom(dr, "train.wait", "summary")
    assert "the job had ended (ended: torn down by the test" in summary["reason"], summary
    assert summary["attempts"] == [], json.dumps(summary["attempts"])
    assert [life.attempt for life in watch.history("worker-1")] == [1]  # evicted, never recreated
    assert leftovers(core, k8s_namespace) == []
