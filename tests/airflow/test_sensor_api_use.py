"""A job's waiting costs one LIST of pods per poll, whatever the replica count, replica tasks included.

The sensor's trigger and every replica task's trigger of one job run in one event loop, as
in the triggerer, sharing the job's watch. Requests are counted at the API server itself, for
the triggers' own identity only: they reach the cluster as a ServiceAccount of the test, and a
FlowSchema matching only that account counts its LISTs (other clients of the shared API server
do not disturb the count).
"""
from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path

import pytest

from tests.fixtures.k8s import create_service_and_pods
from tests.fixtures.waiting import wait_until
from tfk8s_airflow.job.builders.objects import JobNames
from tfk8s_airflow.job.builders.plan import plan_job
from tfk8s_airflow.job.policy import DeploymentPolicy
from tfk8s_airflow.job.run.judge import JobPolicy
from tfk8s_airflow.job.run.resolve import job_record
from tfk8s_airflow.job.spec import parse_spec
from tfk8s_airflow.k8s import watch as kwatch
from tfk8s_airflow.triggers.job import TFJobTrigger, TFReplicaTrigger

pytestmark = [pytest.mark.k8s, pytest.mark.airflow]

METRIC = re.compile(r'^apiserver_flowcontrol_dispatched_requests_total\{(?P<labels>[^}]*)\} (?P<value>\d+)', re.M)
VERBS = ("list", "get", "watch")


def requests_of(k8s_cluster, schema: str) -> dict[str, int]:
    """Requests the account made, per verb (one FlowSchema per verb matches only that account)."""
    text = k8s_cluster.kubectl_run("get", "--raw", "/metrics").stdout
    out: dict[str, int] = {}
    for m in METRIC.finditer(text):
        fs = dict(kv.split("=", 1) for kv in m.group("labels").split(",")).get("flow_schema", "").strip('"')
        if fs.startswith(schema + "-"):
            verb = fs[len(schema) + 1:]
            out[verb] = out.get(verb, 0) + int(m.group("value"))
    return out


@pytest.fixture
def counted_identity(k8s_cluster, k8s_namespace, tmp_path, monkeypatch):
    """A ServiceAccount (with what the triggers need in the namespace), its connection, its FlowSchemas."""
    import yaml

    schema = f"tfk8s-count-{k8s_namespace[-6:]}"
    docs = [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "counted", "namespace": k8s_namespace}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
         "metadata": {"name": "counted", "namespace": k8s_namespace},
         "rules": [{"apiGroups": [""], "resources": ["pods", "pods/log", "services", "configmaps"],
                    "verbs": ["get", "list", "watch", "patch"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": "counted", "namespace": k8s_namespace},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "counted"},
         "subjects": [{"kind": "ServiceAccount", "name": "counted", "namespace": k8s_namespace}]},
    ]
    docs += [{"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
              "metadata": {"name": f"{schema}-{verb}"},
              "spec": {"priorityLevelConfiguration": {"name": "workload-high"}, "matchingPrecedence": 100,
                       "rules": [{"subjects": [{"kind": "ServiceAccount",
                                                "serviceAccount": {"name": "counted", "namespace": k8s_namespace}}],
                                  "resourceRules": [{"verbs": [verb], "apiGroups": [""],
                                                     "resources": ["pods"] if verb == "list" else ["*"],
                                                     "namespaces": ["*"], "clusterScope": True}]}]}}
             for verb in VERBS]
    k8s_cluster.kubectl_run("apply", "-f", "-", input="\n---\n".join(yaml.safe_dump(d) for d in docs))
    token = k8s_cluster.kubectl_run("create", "token", "counted", "-n", k8s_namespace).stdout.strip()
    admin = yaml.safe_load(Path(k8s_cluster.kubeconfig).read_text())
    cluster = admin["clusters"][0]
    kubeconfig = tmp_path / "counted-kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "clusters": [cluster],
        "users": [{"name": "counted", "user": {"token": token}}],
        "contexts": [{"name": "counted", "context": {"cluster": cluster["name"], "user": "counted"}}],
        "current-context": "counted"}))
    monkeypatch.setenv("AIRFLOW_CONN_TFK8S_COUNTED", json.dumps(
        {"conn_type": "kubernetes", "extra": {"kube_config_path": str(kubeconfig)}}))
    yield schema
    k8s_cluster.kubectl_run("delete", "flowschema", *[f"{schema}-{v}" for v in VERBS], "--ignore-not-found")


def create_job(core, namespace, replicas):
    spec = parse_spec({"name": "count", "namespace": namespace, "image": "tfk8s/trainer:0.1",
                                "node_selector": {"type": "kwok"}, "ps": 1, "worker": replicas - 1})
    names = JobNames.for_run(spec, f"count-{replicas}")
    plan = plan_job(spec, names, DeploymentPolicy())
    create_service_and_pods(core, plan)
    wait_until(lambda: sum(p.status.phase == "Running" for p in core.list_namespaced_pod(namespace).items) == replicas,
             120, f"{replicas} pods Running")
    record = job_record(spec, names, plan.replicas, policy=JobPolicy.from_spec(spec),
                        has_shards=False, kubernetes_conn_id="tfk8s_counted", poll_interval=0.2)
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
def test_one_list_per_poll_per_job_replica_tasks_included(k8s_cluster, k8s_namespace, airflow_db, counted_identity,
                                                          replicas):
    record = create_job(k8s_cluster.core_v1, k8s_namespace, replicas)
    before = requests_of(k8s_cluster, counted_identity)
    lists = asyncio.run(drive(record, polls=20))
    after = requests_of(k8s_cluster, counted_identity)
    delta = {k: after.get(k, 0) - before.get(k, 0) for k in set(after) | set(before)}
    assert lists >= 20
    # Exactly one LIST of pods per poll for the sensor and all replica tasks; the other reads are one per poll
    # at most (the lead's progress, a log), one of the Service (the recovery's attempts), none per pod.
    assert delta.get("list", 0) == lists, delta
    assert delta.get("get", 0) <= lists + 2, delta
