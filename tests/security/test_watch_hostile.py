"""The job's shared watch against hostile input on a real API server, with a real training process.

A namespace writer puts a malformed ``tfk8s.io/attempts`` on the job's Service and hostile labels
and annotations on its worker pod (an attempt ``NaN``, an annotation of the recovery state's name
holding garbage), and the training program (a real container on the devstack's real node) prints
``tfk8s.progress {"step": Infinity}`` as its progress line; it exits 0 when the test signals it, once the
watch has read that line on two polls and published four snapshots (a fixed run time was a race: a loaded
machine could spend it before the watch's fourth poll). Before the fix each of them raised out of
the watch's poll (OverflowError, AttributeError), no snapshot came, and after ten polls the watch
ended. Now every poll publishes a snapshot, the job is judged (succeeded, when the worker exits 0),
and each bad value is named in one warning per pod.
"""
from __future__ import annotations

import asyncio
import json
import signal

import pytest

from tests.fixtures.logrecords import log_records
from tests.fixtures.realnode import REAL_NODE_SELECTOR, REAL_NODE_TOLERATIONS
from tests.fixtures.waiting import wait_until
from tfk8s_airflow.job.builders.objects import JobNames, plan_replicas
from tfk8s_airflow.job.builders.plan import plan_job
from tfk8s_airflow.job.policy import DeploymentPolicy
from tfk8s_airflow.job.run.judge import JobPolicy
from tfk8s_airflow.job.run.resolve import job_record
from tfk8s_airflow.job.spec import parse_spec
from tfk8s_airflow.job.states import JobState
from tfk8s_airflow.k8s import watch as kwatch
from tfk8s_airflow.k8s.relaunch import ATTEMPTS_ANNOTATION

pytestmark = [pytest.mark.k8s, pytest.mark.timeout(300)]

PROGRAM = """
import signal, sys, time
signal.signal(signal.SIGUSR1, lambda *_: sys.exit(0))  # the test's word: the watch has seen enough
print('tfk8s.progress {"step": 3, "loss": 0.5}', flush=True)
time.sleep(2)
print('tfk8s.progress {"step": Infinity, "loss": NaN}', flush=True)
while True:
    time.sleep(1)
"""
SAID_INFINITY = "ignored in its progress lines"


def hook_factory(kubeconfig: str):
    class Hook:
        def get_conn(self):
            from contextlib import asynccontextmanager

            from kubernetes_asyncio import config

            @asynccontextmanager
            async def conn():
                api = await config.new_client_from_config(config_file=kubeconfig)
                try:
                    yield api
                finally:
                    await api.close()
            return conn()
    return Hook


def test_a_hostile_annotation_and_an_infinity_step_leave_the_watch_alive_and_the_job_judged(
        realnode, k8s_namespace):
    import os

    core, ns = realnode.cluster.core_v1, k8s_namespace
    realnode.grant_pull(ns)
    spec = parse_spec({"name": "hostile", "namespace": ns, "image": realnode.image,
                                "node_selector": REAL_NODE_SELECTOR, "tolerations": REAL_NODE_TOLERATIONS,
                                "worker": {"replicas": 1, "command": ["python", "-c", PROGRAM]}})
    names = JobNames.for_run(spec, "hostile")
    plan = plan_job(spec, names, DeploymentPolicy())
    for obj in [plan.service, *plan.pods]:  # the pods ungated below: nothing releases them here
        if obj["kind"] == "Pod":
            obj["metadata"]["labels"]["tfk8s.io/attempt"] = "NaN"
            obj["metadata"].setdefault("annotations", {})[ATTEMPTS_ANNOTATION] = '{"attempts": 7'
            obj["spec"].pop("schedulingGates", None)
            core.create_namespaced_pod(ns, obj)
        else:
            obj["metadata"].setdefault("annotations", {})[ATTEMPTS_ANNOTATION] = json.dumps(
                ["attempts", {"overrides": {"worker-0": {"memory": 1e15}}}])
            core.create_namespaced_service(ns, obj)
    record = job_record(spec, names, plan_replicas(spec, names), policy=JobPolicy.from_spec(spec), has_shards=False,
                        kubernetes_conn_id=None, poll_interval=0.5)
    pod = record.replicas[0].pod
    wait_until(lambda: core.read_namespaced_pod(pod, ns).status.phase == "Running", 120, "the worker Running")

    async def scenario(records):
        snaps, read_at, ended = [], None, False
        async with kwatch.watch_job(record, interval=0.5, hook_factory=hook_factory(os.environ["KUBECONFIG"])) as w:
            async with asyncio.timeout(120):
                async for snap in w.snapshots():
                    snaps.append(snap)
                    if read_at is None and any(SAID_INFINITY in r.getMessage() for r in records):
                        read_at = len(snaps)  # this snapshot's poll read the Infinity line first
                    if not ended and read_at is not None and len(snaps) >= max(4, read_at + 2):
                        realnode.kill(ns, pod, sig=signal.SIGUSR1)  # the program exits 0
                        ended = True
                    if snap.status is not None and snap.status.state == JobState.SUCCEEDED:
                        break
        return snaps, ended

    with log_records("tfk8s_airflow.k8s.watch") as records:
        snaps, ended = asyncio.run(scenario(records))
    assert ended, snaps[-1]  # the job ended when the test said so, after the polls it asserts on
    errors = [s.error for s in snaps if s.error is not None]
    assert not errors, errors  # before: OverflowError / AttributeError published as errors, then the end
    assert snaps[-1].status.state == JobState.SUCCEEDED, snaps[-1]
    assert all(s.progress is None or s.progress.step in (None, 3) for s in snaps)  # Infinity never a step
    said = [r.getMessage() for r in records]
    ignored = [m for m in said if f"pod {pod}: ignored in its labels" in m]
    assert len(ignored) == 1, said  # the attempt label: once per pod, however many polls
    assert "tfk8s.io/attempt" in ignored[0] and "NaN" in ignored[0]
    assert any("attempts on its Service cannot be read" in m for m in said), said
    steps = [m for m in said if f"pod {pod}: {SAID_INFINITY}" in m]
    assert len(steps) == 1 and "Infinity" in steps[0], said  # named once, whatever the polls that read it
    assert len(snaps) >= 4
    # The kubelet writes the pod's terminal phase a moment after the container's end, which the judge read.
    wait_until(lambda: core.read_namespaced_pod(pod, ns).status.phase == "Succeeded", 30, "the pod Succeeded")
