"""A job's waiting costs one LIST of pods per poll, whatever the replica count, replica tasks included.

The sensor's trigger and every replica task's trigger of one job run in one event loop, as
in the triggerer, sharing the job's watch. Requests are counted at the API server itself
(apiserver_request_total), not in the client.
"""
from __future__ import annotations

import asyncio
import re
import time

import pytest

from tests.fixtures.k8s import wait_for
from tfk8s_airflow.job.judge import JobPolicy
from tfk8s_airflow.job.objects import JobNames, job_manifests, plan_replicas
from tfk8s_airflow.job.resolve import job_record
from tfk8s_airflow.job.spec import TFJobSpec
from tfk8s_airflow.k8s import watch as kwatch
from tfk8s_airflow.triggers.job import TFJobTrigger, TFReplicaTrigger

pytestmark = [pytest.mark.k8s, pytest.mark.airflow]

METRIC = re.compile(r'^apiserver_request_total\{(?P<labels>[^}]*)\} (?P<value>\d+)', re.M)


def pod_requests(k8s_cluster) -> dict[str, int]:
    text = k8s_cluster.kubectl_run("get", "--raw", "/metrics").stdout
    out: dict[str, int] = {}
    for m in METRIC.finditer(text):
        labels = dict(kv.split("=", 1) for kv in m.group("labels").split(","))
        labels = {k: v.strip('"') for k, v in labels.items()}
        if labels.get("resource") == "pods" and labels.get("subresource") == "":
            key = f"{labels['verb']}/{labels['scope']}"
            out[key] = out.get(key, 0) + int(m.group("value"))
    return out


def create_job(core, namespace, replicas):
    spec = TFJobSpec.from_dict({"name": "count", "namespace": namespace, "image": "tfk8s/trainer:0.1",
                                "node_selector": {"type": "kwok"}, "ps": 1, "worker": replicas - 1})
    names = JobNames.for_run(spec, f"count-{replicas}")
    for obj in job_manifests(spec, names):
        if obj["kind"] == "Pod":
            core.create_namespaced_pod(namespace, obj)
        else:
            core.create_namespaced_service(namespace, obj)
    wait_for(lambda: sum(p.status.phase == "Running" for p in core.list_namespaced_pod(namespace).items) == replicas,
             120, f"{replicas} pods Running")
    record = job_record(spec, names, plan_replicas(spec, names), policy=JobPolicy.from_spec(spec),
                        has_shards=False, kubernetes_conn_id="kubernetes_default", poll_interval=0.2)
    return record


async def drive(record, polls: int) -> int:
    """Run the sensor's and every replica's trigger together until the watch made ``polls`` LISTs."""
    job = record.to_xcom()
    triggers = [TFJobTrigger(job=job)] + [TFReplicaTrigger(job=job, replica=r.key) for r in record.replicas]
    tasks = [asyncio.ensure_future(t.run().__anext__()) for t in triggers]
    deadline = time.monotonic() + 90
    watch = None
    while watch is None and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
        watch = next(iter(kwatch._WATCHES.values()), None)
    assert watch is not None
    seq = 0
    while watch.lists < polls and time.monotonic() < deadline:
        seq = (await asyncio.wait_for(watch.next(seq), 30)).seq
    # Right after a poll was published the watch sleeps: no LIST is in flight when we stop.
    assert watch.subscribers == len(triggers), "the triggers do not share one watch"
    assert not any(t.done() for t in tasks), "a trigger fired although the job is still running"
    lists = watch.lists
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    assert not kwatch._WATCHES, "the watch outlived its subscribers"
    return lists


@pytest.mark.parametrize("replicas", [2, 64])
def test_one_list_per_poll_per_job_replica_tasks_included(k8s_cluster, k8s_namespace, airflow_db, replicas):
    record = create_job(k8s_cluster.core_v1, k8s_namespace, replicas)
    before = pod_requests(k8s_cluster)
    lists = asyncio.run(drive(record, polls=20))
    after = pod_requests(k8s_cluster)
    delta = {k: after.get(k, 0) - before.get(k, 0) for k in set(after) | set(before)}
    delta = {k: v for k, v in delta.items() if v}
    assert lists >= 20
    # Exactly one namespaced LIST per poll for the sensor and all replica tasks, and no per-pod GET.
    assert delta.get("LIST/namespace", 0) == lists, delta
    assert delta.get("GET/resource", 0) == 0, delta
