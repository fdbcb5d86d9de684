"""Only the job's own pods speak for it, on the devstack's API server with KWOK nodes.

Setup (the real operator, ``dag.test()``) records each replica pod's UID from its creation response.
Then a namespace writer who may create and patch pods puts two pods of their own beside the job's,
labelled as its ``worker-0`` (a newer attempt, and succeeded) and ``worker-1`` (failed), with
``restartPolicy: Never`` (KWOK ends them as a kubelet would). Before the record, the judge read
replicas by label: the first made the running job succeed, the second failed it. Now the job's
shared watch (the real one, polling the API server) keeps the job running and names each stranger
once in a warning; when the job's own ``worker-0`` fails, the job fails naming that pod, whatever the
stranger says. Teardown (the real operator) deletes the job's objects and leaves the strangers alone.
"""
from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from tests.dagrun import states, xcom
from tests.fixtures.logrecords import log_records
from tests.fixtures.waiting import wait_until
from tests.security.test_watch_hostile import hook_factory
from tfk8s_airflow.job.run.records import JobRecord
from tfk8s_airflow.job.states import JobState
from tfk8s_airflow.k8s import watch as kwatch

pytestmark = [pytest.mark.k8s, pytest.mark.airflow, pytest.mark.timeout(600)]
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "dags"))


def _stranger(job: str, name: str, index: int, exit_code: int) -> dict:
    """A pod of someone else's that carries the job's labels as replica ``worker-<index>``, attempt 99."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"tfk8s.io/job": job, "tfk8s.io/role": "worker",
                                                  "tfk8s.io/index": str(index), "tfk8s.io/attempt": "99"},
                         "annotations": {"tfk8s.io/sim-duration": "1s", "tfk8s.io/sim-exit-code": str(exit_code)}},
            "spec": {"restartPolicy": "Never", "nodeSelector": {"type": "kwok"},
                     "containers": [{"name": "tensorflow", "image": "tfk8s/trainer:0.1"}]}}


def _fail(core, ns: str, pod: str) -> None:
    """The job's own pod ends with exit code 3, as the kubelet reports it (the status subresource)."""
    now = "2026-01-01T00:00:10Z"
    core.patch_namespaced_pod_status(pod, ns, {"status": {"phase": "Failed", "containerStatuses": [
        {"name": "tensorflow", "image": "tfk8s/trainer:0.1", "imageID": "", "ready": False, "restartCount": 0,
         "state": {"terminated": {"exitCode": 3, "reason": "Error", "startedAt": now, "finishedAt": now}}}]}})


def test_a_relabelled_stranger_neither_ends_the_job_nor_goes_with_it(k8s_cluster, k8s_namespace, airflow_db):
    import tfk8s_security_scenarios

    core, ns = k8s_cluster.core_v1, k8s_namespace
    dr = tfk8s_security_scenarios.setup_only.test(run_conf={"namespace": ns})
    assert dr.state == "success", states(dr)
    record = JobRecord.from_xcom(xcom(dr, "setup", key="job"))
    assert record.service_uid and all(r.uid for r in record.replicas)
    for ref in record.replicas:  # the UIDs recorded are the pods' own
        assert core.read_namespaced_pod(ref.pod, ns).metadata.uid == ref.uid
    wait_until(lambda: all(core.read_namespaced_pod(r.pod, ns).status.phase == "Running" for r in record.replicas),
             120, "the job's pods Running")
    core.create_namespaced_pod(ns, _stranger(record.job, "stranger-ok", 0, 0))
    core.create_namespaced_pod(ns, _stranger(record.job, "stranger-bad", 1, 1))
    wait_until(lambda: core.read_namespaced_pod("stranger-ok", ns).status.phase == "Succeeded", 120, "stranger-ok ends")
    wait_until(lambda: core.read_namespaced_pod("stranger-bad", ns).status.phase == "Failed", 120, "stranger-bad ends")
    worker0 = record.replica_by_key("worker-0").pod

    async def scenario():
        snaps = []
        hook = hook_factory(os.environ["KUBECONFIG"])
        async with kwatch.watch_job(record, interval=0.5, hook_factory=hook) as w:
            async with asyncio.timeout(120):
                async for snap in w.snapshots():
                    snaps.append(snap)
                    if len(snaps) == 4:  # four polls with both strangers there, ended: the job still runs
                        await asyncio.to_thread(_fail, core, ns, worker0)
                    if snap.status is not None and snap.status.state == JobState.FAILED:
                        break
        return snaps

    with log_records("tfk8s_airflow.k8s.watch") as records:  # not the console: see tests/fixtures/logrecords.py
        snaps = asyncio.run(scenario())
    assert not [s.error for s in snaps if s.error is not None]
    assert [s.status.state for s in snaps[:4]] == [JobState.RUNNING] * 4, [s.status for s in snaps[:4]]
    last = snaps[-1].status
    assert last.state == JobState.FAILED and last.failed_pod == worker0 and "exit code 3" in last.reason, last
    said = [r.getMessage() for r in records]
    for stranger in ("stranger-ok", "stranger-bad"):
        warned = [m for m in said if f"pod {stranger}: ignored" in m]
        assert len(warned) == 1 and "not the job's pod" in warned[0], said[-20:]

    dr = tfk8s_security_scenarios.teardown_only.test(run_conf={"job": record.to_xcom()})
    assert dr.state == "success", states(dr)
    left = {p.metadata.name for p in core.list_namespaced_pod(ns).items}
    assert left == {"stranger-ok", "stranger-bad"}, left
    assert not core.list_namespaced_service(ns, label_selector=record.selector).items
