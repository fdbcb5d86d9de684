"""The log follower against a real API server and the real node's kubelet (no Airflow).

A pod prints numbered lines, pauses (the follower flushes on idle), fails, is restarted in place
by the kubelet (restartPolicy OnFailure) and prints the rest: the file must hold every line exactly
once, in order, with one separator line between the two containers.

A follower that starts after such a pod ended meets what a real kubelet does: it keeps one ended
run per container and removes the earlier run as soon as a later one ends, and asked for the
removed run's log (``previous=true``) it answers status 200 with a line saying it cannot. That
line is not the replica's output: the file holds the run that exists, and the task log says the
earlier one is gone.
"""
from __future__ import annotations

import asyncio
import logging
import os
from contextlib import asynccontextmanager

import pytest

from tests.fixtures.realnode import REAL_NODE_SELECTOR, REAL_NODE_TOLERATIONS
from tests.fixtures.waiting import wait_until
from tfk8s_airflow.k8s.logstream import CHUNK_BYTES, Incarnation, LogFollower

pytestmark = [pytest.mark.k8s, pytest.mark.timeout(300)]

PROGRAM = """
import os, sys, time
marker = "/scratch/first-run-done"
if not os.path.exists(marker):
    for i in range(6000):
        print(f"line {i:05d} of the first container")
    sys.stdout.flush()
    time.sleep(3)
    for i in range(6000, 12000):
        print(f"line {i:05d} of the first container")
    open(marker, "w").close()
    sys.exit(3)
time.sleep(3)  # running long enough to be seen running: followed live, not read afterwards
for i in range(12000, 20000):
    print(f"line {i:05d} of the second container")
"""


@asynccontextmanager
async def open_api():
    from kubernetes_asyncio import config

    api = await config.new_client_from_config(config_file=os.environ["KUBECONFIG"])
    try:
        yield api
    finally:
        await api.close()


def test_a_followed_log_holds_every_line_once_across_a_restart_in_place(node, k8s_namespace, tmp_path):
    core, ns, name = node.cluster.core_v1, k8s_namespace, "chatty-0"
    core.create_namespaced_pod(ns, {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"restartPolicy": "OnFailure", "nodeSelector": REAL_NODE_SELECTOR, "tolerations": REAL_NODE_TOLERATIONS,
                 "containers": [{"name": "tensorflow", "image": node.image, "command": ["python", "-c", PROGRAM],
                                 "env": [{"name": "PYTHONUNBUFFERED", "value": "0"}],
                                 "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}]}],
                 "volumes": [{"name": "scratch", "emptyDir": {}}]}})
    follower_said: list[tuple[str, int]] = []

    async def follow() -> LogFollower:
        follower = LogFollower(open_api=open_api, namespace=ns, pod=name, container="tensorflow",
                               log_dir=str(tmp_path), job="job")
        while True:
            pod = await asyncio.to_thread(core.read_namespaced_pod, name, ns)
            cs = (pod.status.container_statuses or [None])[0]
            state = cs.state if cs else None
            cid = cs.container_id if cs and state and (state.running or state.terminated) else None
            running = bool(state and state.running)
            follower.update(Incarnation(pod.metadata.creation_timestamp.timestamp(), cid, cs.restart_count)
                            if cid else None, running=running)
            follower_said.append((pod.status.phase, cs.restart_count if cs else 0))
            if pod.status.phase in ("Succeeded", "Failed"):
                await follower.close(10)
                return follower
            await asyncio.sleep(0.3)

    follower = asyncio.run(follow())
    lines = (tmp_path / "job" / f"{name}.log").read_text().splitlines()
    first = [f"line {i:05d} of the first container" for i in range(12000)]
    second = [f"line {i:05d} of the second container" for i in range(12000, 20000)]
    assert len(lines) == 20001, (len(lines), lines[:1], [x for x in lines if x.startswith("---")],
                                 sorted(set(follower_said)))
    assert lines[:12000] == first and lines[12001:] == second
    assert lines[12000].startswith(f"--- {name}: container restart 1 (")
    assert follower.written == (tmp_path / "job" / f"{name}.log").stat().st_size > 4 * CHUNK_BYTES
    # Both containers were seen running (each sleeps 3 s; the loop polls every 0.3 s): followed live.
    assert ("Running", 0) in follower_said and ("Running", 1) in follower_said, follower_said
    core.delete_namespaced_pod(name, ns, grace_period_seconds=0)
    wait_until(lambda: not core.list_namespaced_pod(ns).items, 30, "the pod deleted")


TWICE = """
import os, sys
marker = "/scratch/first-run-done"
if not os.path.exists(marker):
    for i in range(50):
        print(f"first run line {i}")
    open(marker, "w").close()
    sys.exit(3)
for i in range(50):
    print(f"second run line {i}")
"""


def test_a_follower_that_starts_after_the_pod_ended_skips_the_run_the_kubelet_removed(node, k8s_namespace,
                                                                                       tmp_path, caplog):
    core, ns, name = node.cluster.core_v1, k8s_namespace, "twice-0"
    core.create_namespaced_pod(ns, {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"restartPolicy": "OnFailure", "nodeSelector": REAL_NODE_SELECTOR,
                 "tolerations": REAL_NODE_TOLERATIONS, "terminationGracePeriodSeconds": 1,
                 "containers": [{"name": "tensorflow", "image": node.image, "command": ["python", "-c", TWICE],
                                 "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}]}],
                 "volumes": [{"name": "scratch", "emptyDir": {}}]}})
    pod = wait_until(lambda: (p := core.read_namespaced_pod(name, ns)).status.phase in ("Succeeded", "Failed") and p,
                   180, f"pod {name} to end")
    cs = pod.status.container_statuses[0]
    assert pod.status.phase == "Succeeded" and cs.restart_count == 1, pod.status

    def previous() -> str:
        return core.read_namespaced_pod_log(name, ns, container="tensorflow", previous=True,
                                            _preload_content=False).data.decode()
    # The case itself: the kubelet no longer has the first run, and says so with status 200.
    gone = wait_until(lambda: (t := previous()).startswith("unable to retrieve container logs for ") and t, 60,
                    "the kubelet to remove the first run")
    assert "first run" not in gone

    async def follow() -> LogFollower:
        follower = LogFollower(open_api=open_api, namespace=ns, pod=name, container="tensorflow",
                               log_dir=str(tmp_path), job="job")
        follower.update(Incarnation(pod.metadata.creation_timestamp.timestamp(), cs.container_id,
                                    cs.restart_count), running=False)
        await asyncio.sleep(3)
        await follower.close(10)
        return follower

    with caplog.at_level(logging.INFO, logger="tfk8s_airflow.k8s.logstream"):
        asyncio.run(follow())
    lines = (tmp_path / "job" / f"{name}.log").read_text().splitlines()
    assert lines == [f"second run line {i}" for i in range(50)], lines[:5]
    said = [r.getMessage() for r in caplog.records if "previous container is gone" in r.getMessage()]
    assert said and "unable to retrieve container logs for " in said[0], caplog.text
    core.delete_namespaced_pod(name, ns, grace_period_seconds=0)
    wait_until(lambda: not core.list_namespaced_pod(ns).items, 30, "the pod deleted")
