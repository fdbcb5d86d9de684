"""The log follower against a real API server and the node agent's log endpoint (no Airflow).

A pod prints numbered lines, pauses (the follower flushes on idle), fails, is restarted in place
by the agent (restartPolicy OnFailure) and prints the rest: the file must hold every line exactly
once, in order, with one separator line between the two containers.
"""
from __future__ import annotations

import asyncio
import os
from contextlib import asynccontextmanager

import pytest

from tests.fixtures.nodeagent import LOCAL_NODE_SELECTOR, LOCAL_TOLERATIONS
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


def test_a_followed_log_holds_every_line_once_across_a_restart_in_place(agent, k8s_namespace, tmp_path):
    core, ns, name = agent.cluster.core_v1, k8s_namespace, "chatty-0"
    core.create_namespaced_pod(ns, {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"restartPolicy": "OnFailure", "nodeSelector": LOCAL_NODE_SELECTOR, "tolerations": LOCAL_TOLERATIONS,
                 "containers": [{"name": "tensorflow", "image": "python:3.11", "command": ["python", "-c", PROGRAM],
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
