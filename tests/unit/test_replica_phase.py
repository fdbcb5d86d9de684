"""A replica's phase between its containers' end and the kubelet's terminal phase.

A real kubelet writes a container's ``terminated`` state at once, and the pod's ``Succeeded`` or
``Failed`` only after it has stopped the pod, its sandbox included (about a second later on the
devstack's real node). The judge, the sensor's summary and the TF jobs view read the phase the kubelet
is about to write, by its own rule, so a worker that exited 0 is never shown as running.
"""
from __future__ import annotations

import pytest

from tfk8s_airflow.job.run.judge import read_replica


def _pod(policy: str | None, codes: list[int | None], phase: str = "Running", containers: int | None = None) -> dict:
    statuses = [{"name": f"c{i}", "restartCount": 0,
                 "state": {"terminated": {"exitCode": c}} if c is not None else {"running": {}}}
                for i, c in enumerate(codes)]
    spec: dict = {"containers": [{"name": f"c{i}"} for i in range(len(codes) if containers is None else containers)]}
    if policy is not None:
        spec["restartPolicy"] = policy
    return {"metadata": {"name": "j-worker-1", "labels": {"tfk8s.io/role": "worker", "tfk8s.io/index": "1"}},
            "spec": spec, "status": {"phase": phase, "containerStatuses": statuses}}


@pytest.mark.parametrize(("policy", "codes", "phase"), [
    ("Never", [0], "Succeeded"),
    ("OnFailure", [0], "Succeeded"),
    ("Never", [1], "Failed"),
    ("Never", [0, 137], "Failed"),
    ("OnFailure", [1], "Running"),  # the kubelet restarts it in place
    ("Always", [0], "Running"),
    (None, [0], "Running"),  # no policy written: Kubernetes' default, Always
    ("Never", [0, None], "Running"),  # a container still runs
])
def test_a_running_pod_whose_containers_all_ended_has_the_phase_the_kubelet_writes_next(policy, codes, phase):
    state, problems = read_replica(_pod(policy, codes))
    assert state is not None and not problems
    assert state.phase == phase


def test_only_a_running_pod_is_read_ahead_and_a_container_not_yet_reported_keeps_it_running():
    assert read_replica(_pod("Never", [0], phase="Failed"))[0].phase == "Failed"  # the kubelet's word stands
    assert read_replica(_pod("Never", [0], containers=2))[0].phase == "Running"  # a second container unreported
    odd = _pod("Never", [0])
    odd["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] = True  # no exit code
    assert read_replica(odd)[0].phase == "Running"
