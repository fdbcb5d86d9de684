"""The job watch costs one LIST of pods per poll, whatever the replica count.

Counted at the API server itself (apiserver_request_total), not in the client.
"""
from __future__ import annotations

import asyncio
import re
import time

import pytest

from tests.fixtures.k8s import wait_for
from tfk8s_airflow.job.judge import JobPolicy
from tfk8s_airflow.job.objects import JobNames, job_manifests
from tfk8s_airflow.job.spec import TFJobSpec
from tfk8s_airflow.k8s import client as kbackend
from tfk8s_airflow.triggers.job import TFJobTrigger

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


def create_job(core, namespace, workers):
    spec = TFJobSpec.from_dict({"name": "count", "namespace": namespace, "image": "tfk8s/trainer:0.1",
                                "node_selector": {"type": "kwok"}, "ps": 1, "worker": workers - 1})
    names = JobNames.for_run(spec, f"count-{workers}")
    for obj in job_manifests(spec, names):
        if obj["kind"] == "Pod":
            core.create_namespaced_pod(namespace, obj)
        else:
            core.create_namespaced_service(namespace, obj)
    wait_for(lambda: sum(p.status.phase == "Running" for p in core.list_namespaced_pod(namespace).items) == workers,
             120, f"{workers} pods Running")
    return spec, names


async def drive(trigger: TFJobTrigger, polls: int, counter: list[int]) -> None:
    gen = trigger.run()
    task = asyncio.ensure_future(gen.__anext__())
    deadline = time.monotonic() + 60
    while counter[0] < polls and not task.done() and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert not task.done(), "the trigger fired although the job is still running"
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


@pytest.mark.parametrize("replicas", [2, 64])
def test_one_list_per_poll(k8s_cluster, k8s_namespace, airflow_db, monkeypatch, replicas):
    spec, names = create_job(k8s_cluster.core_v1, k8s_namespace, replicas)
    counter = [0]
    real = kbackend.list_pods_async

    async def counting(*args, **kwargs):
        result = await real(*args, **kwargs)
        counter[0] += 1
        return result

    monkeypatch.setattr(kbackend, "list_pods_async", counting)
    trigger = TFJobTrigger(job=names.job, namespace=names.namespace, selector=names.selector,
                           policy=JobPolicy.from_spec(spec).to_dict(), watch_started=time.time(),
                           poll_interval=0.05)
    polls = 20
    before = pod_requests(k8s_cluster)
    asyncio.run(drive(trigger, polls, counter))
    after = pod_requests(k8s_cluster)
    delta = {k: after.get(k, 0) - before.get(k, 0) for k in set(after) | set(before)}
    delta = {k: v for k, v in delta.items() if v}
    done = counter[0]
    assert done >= polls
    # Exactly one namespaced LIST per poll and no per-pod GETs, at 2 as at 64 replicas.
    assert delta.get("LIST/namespace", 0) == done, delta
    assert delta.get("GET/resource", 0) == 0, delta
