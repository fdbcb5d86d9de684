"""A hostile ``tfk8s.io/verdict`` on the job's Service, on the devstack's API server with KWOK nodes.

Anyone who may write Services in the namespace may write the job's verdict annotation. Setup (the
real operator, ``dag.test()``) starts a job; then the Service gets a verdict nested 1,900 levels
deep (``json.loads`` raised ``RecursionError`` on it: the job's shared watch ended and teardown failed
before it deleted anything, leaving the pods to hold their resources until their deadline), and then
the largest annotation the API server takes (256 KiB: a 10 MiB one it refuses itself, so the 10 MiB
case is the reader's unit test, tests/security/test_untrusted_fuzz.py), a verdict
of ``succeeded`` whose reason is far beyond the reader's bound. Each is ignored with a warning: the
real shared watch polls on, the job runs until its own ``worker-0`` exits 3 and fails naming that
pod, and teardown (the real operator), the nested verdict back on the Service, deletes the job's objects.
"""
from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from pathlib import Path

import pytest
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import MaxRetryError

from tests.dagrun import states, xcom
from tests.fixtures.logrecords import log_records
from tests.fixtures.waiting import wait_until
from tests.security.test_recorded_pods_k8s import _fail
from tests.security.test_watch_hostile import hook_factory
from tfk8s_airflow.job.run.records import JobRecord
from tfk8s_airflow.job.run.verdict import VERDICT_ANNOTATION
from tfk8s_airflow.job.states import JobState
from tfk8s_airflow.k8s import watch as kwatch

pytestmark = [pytest.mark.k8s, pytest.mark.airflow, pytest.mark.timeout(600)]
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "dags"))

#: Each value is this run's own (``by``): the reader warns once per value in a process, and another test of the
#: process may have fed it the same brackets.
RUN = uuid.uuid4().hex
NESTED = '{"state": "succeeded", "by": "' + RUN + '", "reason": ' + "[" * 1900 + "]" * 1900 + "}"  # within 4000 B
#: The API server's bound on all of an object's annotations together is 256 KiB.
LARGEST = json.dumps({"state": "succeeded", "by": RUN, "reason": "x" * (250 * 1024)})
assert len(NESTED) < 4000


def _annotate(core, ns: str, service: str, value: str) -> None:
    core.patch_namespaced_service(service, ns, {"metadata": {"annotations": {VERDICT_ANNOTATION: value}}})


async def _watch(record: JobRecord, polls: int, then=None) -> list:
    """Snapshots of the real shared watch: ``polls`` of them, then ``then()`` and on until a final state."""
    snaps = []
    async with kwatch.watch_job(record, interval=0.5, hook_factory=hook_factory(os.environ["KUBECONFIG"])) as w:
        async with asyncio.timeout(120):
            async for snap in w.snapshots():
                snaps.append(snap)
                if len(snaps) == polls:
                    if then is None:
                        break
                    await asyncio.to_thread(then)
                if snap.status is not None and snap.status.state in (JobState.FAILED, JobState.SUCCEEDED):
                    break
    return snaps


def test_a_hostile_verdict_neither_ends_the_watch_nor_steers_the_job(k8s_cluster, k8s_namespace, airflow_db):
    import tfk8s_security_scenarios

    core, ns = k8s_cluster.core_v1, k8s_namespace
    dr = tfk8s_security_scenarios.setup_only.test(run_conf={"namespace": ns})
    assert dr.state == "success", states(dr)
    record = JobRecord.from_xcom(xcom(dr, "setup", key="job"))
    assert record.templates  # the watch reads the Service (recovery's record and the verdict)
    wait_until(lambda: all(core.read_namespaced_pod(r.pod, ns).status.phase == "Running" for r in record.replicas),
               120, "the job's pods Running")
    # A 10 MiB annotation never reaches a reader: the server refuses its request (beyond its 3 MiB body
    # bound it drops the connection), and the Service holds no verdict after it.
    with pytest.raises((ApiException, MaxRetryError)):
        _annotate(core, ns, record.service, json.dumps({"state": "succeeded", "reason": "x" * (10 << 20)}))
    assert VERDICT_ANNOTATION not in (core.read_namespaced_service(record.service, ns).metadata.annotations or {})
    with pytest.raises(ApiException) as refused:  # 256 KiB and one byte: refused by name
        _annotate(core, ns, record.service, "x" * (256 * 1024 + 1))
    assert refused.value.status == 422 and "262144" in refused.value.body

    worker0 = record.replica_by_key("worker-0").pod
    with log_records("tfk8s_airflow") as records:  # not capfd: see tests/fixtures/logrecords.py
        _annotate(core, ns, record.service, NESTED)
        nested = asyncio.run(_watch(record, 4))
        _annotate(core, ns, record.service, LARGEST)
        large = asyncio.run(_watch(record, 4, then=lambda: _fail(core, ns, worker0)))
    said = "\n".join(r.getMessage() for r in records)

    for snaps in (nested, large):
        assert not [s.error for s in snaps if s.error is not None]
        assert [s.status.state for s in snaps[:4]] == [JobState.RUNNING] * 4, [s.status for s in snaps[:4]]
    assert len(nested) == 4
    last = large[-1].status
    assert last.state == JobState.FAILED and last.failed_pod == worker0 and "exit code 3" in last.reason, last
    assert f"the annotation {VERDICT_ANNOTATION} ignored: " in said and "nests more than" in said
    assert "is larger than 4000 bytes" in said

    _annotate(core, ns, record.service, NESTED)
    dr = tfk8s_security_scenarios.teardown_only.test(run_conf={"job": record.to_xcom()})
    assert dr.state == "success", states(dr)
    assert not core.list_namespaced_pod(ns, label_selector=record.selector).items
    assert not core.list_namespaced_service(ns, label_selector=record.selector).items
