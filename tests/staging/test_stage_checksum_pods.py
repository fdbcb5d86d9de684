"""Staging files already on GlusterFS with a fan-out of checksum pods (``GlusterFSStageOperator``,
``copy_executor="kubernetes"``): the real GlusterFS mount, kube-apiserver and node agent pods, through
``dag.test()`` (the trigger runs inline) or the operator's and trigger's own calls.

The checksum pods run :mod:`tfk8s_airflow.pod.stagesum` of this checkout (``PYTHONPATH`` through the
deployment's ``staging_pod_template``) on the node agent, reading the GlusterFS mount (hostPath).
"""
from __future__ import annotations

import asyncio
import copy
import glob
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.fixtures.nodeagent import LOCAL_NODE_SELECTOR, LOCAL_TOLERATIONS
from tests.fixtures.waiting import wait_until
from tests.staging.test_stage_pods import Watcher, comparable, states
from tfk8s_airflow.staging.manifest import MANIFEST_NAME, read_local

pytestmark = [pytest.mark.airflow, pytest.mark.gluster, pytest.mark.k8s]
REPO = Path(__file__).resolve().parents[2]
MiB = 1 << 20
DS = "2026-03-04"


@pytest.fixture
def sums_env(monkeypatch, nodeagent, k8s_namespace, gluster_volume):
    """The deployment's staging settings for the test's namespace (the pods' image is ignored by the
    node agent; ``PYTHONPATH`` points them at this checkout)."""
    monkeypatch.setenv("TFK8S_STAGING_IMAGE", "python:3.12-slim")
    monkeypatch.setenv("TFK8S_STAGING_NAMESPACE", k8s_namespace)
    monkeypatch.setenv("TFK8S_STAGING_THRESHOLD", "1Mi")
    monkeypatch.setenv("TFK8S_STAGING_POD_TEMPLATE", json.dumps({
        "nodeSelector": LOCAL_NODE_SELECTOR, "tolerations": LOCAL_TOLERATIONS,
        "env": [{"name": "PYTHONPATH", "value": str(REPO)}]}))
    return k8s_namespace


def scenarios():
    sys.path.insert(0, str(REPO / "tests" / "dags"))
    import tfk8s_staging_scenarios

    return tfk8s_staging_scenarios


def run(executor: str, **conf):
    import pendulum

    dag = getattr(scenarios(), f"stage_gluster_pods_{executor}")
    return dag.test(run_conf=conf, logical_date=pendulum.parse(DS))


def write_input(root: Path, sizes: list[int]) -> dict[str, bytes]:
    out = {}
    for i, size in enumerate(sizes):
        name = f"sub{i % 2}/part-{i:05d}"
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        data = os.urandom(size)
        (root / name).write_bytes(data)
        out[name] = data
    (root / "_SUCCESS").write_bytes(b"")
    (root / ".hidden").write_bytes(b"not data")
    return out


def leftovers(root: Path, core, namespace: str) -> tuple[list[str], list[str]]:
    """Hidden per-task directories beside ``root`` and pods left in the namespace."""
    hidden = [p.name for p in root.parent.iterdir() if p.name.startswith(f".{root.name}.")]
    return hidden, [p.metadata.name for p in core.list_namespaced_pod(namespace).items]


def deferred_task(root: Path, run_id: str, workers: int = 2):
    """The scenario's task started by hand: it lists, plans, creates its pods and defers."""
    from airflow.sdk.exceptions import TaskDeferred

    # A copy: the scenario DAG's own task stays as it is for the tests that run the DAG.
    task = copy.deepcopy(scenarios().stage_gluster_pods_kubernetes.get_task("stage"))
    task.input_path, task.num_workers = str(root), workers
    ti = SimpleNamespace(dag_id="tfk8s_t_stage_gluster_pods_kubernetes", run_id=run_id, task_id="stage",
                         map_index=-1)
    with pytest.raises(TaskDeferred) as deferred:
        task.execute({"ti": ti})
    return task, ti, deferred.value.trigger


def wait_for_event(trigger) -> dict:
    async def first():
        async for event in trigger.run():
            return event.payload
        return None

    return asyncio.run(asyncio.wait_for(first(), 300))


def test_checksum_pods_write_the_local_manifest(sums_env, gluster_dir, nodeagent, k8s_cluster, airflow_db):
    root = gluster_dir / f"clicks/dt={DS}"
    written = write_input(root, [3 * MiB + 17, 2 * MiB, 0, 1] + [40_000 + i for i in range(30)])
    os.link(root / "sub0/part-00000", root / "sub1/linked")  # a hard link is data, as in the local pass
    os.symlink("part-00002", root / "sub0/alias")  # a link inside the input: listed once, by its target

    dr = run("local", input=str(root), workers=3)
    assert states(dr) == {"stage": "success"}
    local_doc = read_local(root / MANIFEST_NAME)
    (root / MANIFEST_NAME).unlink()

    watcher = Watcher(k8s_cluster.core_v1, sums_env, root)
    watcher.start()
    dr = run("kubernetes", input=str(root), workers=3)
    watcher.stop.set()
    watcher.join()
    assert states(dr) == {"stage": "success"}
    assert len({p.rsplit("-a", 1)[0] for p in watcher.pods}) == 3, watcher.pods  # three parts, one attempt each
    pods_doc = read_local(root / MANIFEST_NAME)
    # The same document, but for when it was written.
    assert comparable(pods_doc, str(root)) == comparable(local_doc, str(root))
    assert pods_doc["total_files"] == len(written) + 1
    assert {f["checksum"]["algorithm"] for f in pods_doc["files"]} == {"SHA256"}
    logs = "".join(Path(f).read_text() for f in glob.glob(f"{nodeagent.logs_dir}/{sums_env}_*/copy/*.log"))
    assert logs.count("bytes digested (sha256)") == 3, logs[-2000:]
    assert leftovers(root, k8s_cluster.core_v1, sums_env) == ([], [])


def test_file_changed_after_listing_fails_naming_it(sums_env, gluster_dir, nodeagent, k8s_cluster, airflow_db):
    from tfk8s_airflow.exceptions import StagingError

    root = gluster_dir / "changed"
    write_input(root, [200_000, 100_000, 50_000, 25_000])
    task, ti, trigger = deferred_task(root, "changed-after")
    event = wait_for_event(trigger)
    assert event["status"] == "ended" and set(event["phases"].values()) == {"Succeeded"}, event
    victim = root / "sub1/part-00001"
    with victim.open("ab") as fh:  # appended to after its pod read it
        fh.write(b"late")
    with pytest.raises(StagingError, match=f"{victim} changed since the listing"):
        task.sums_ended({"ti": ti}, event)
    assert not (root / MANIFEST_NAME).exists()
    assert leftovers(root, k8s_cluster.core_v1, sums_env) == ([], [])


def test_forged_record_fails_naming_the_file(sums_env, gluster_dir, nodeagent, k8s_cluster, airflow_db):
    """A record on the volume that is not what its pod read (any pod can write the volume): its file's size
    and modification time are not the listing's, so the task fails naming that file."""
    from tfk8s_airflow.exceptions import StagingError

    root = gluster_dir / "forged"
    write_input(root, [200_000, 100_000, 50_000, 25_000])
    task, ti, trigger = deferred_task(root, "forged-record")
    event = wait_for_event(trigger)
    assert event["status"] == "ended", event
    [records] = glob.glob(str(root.parent / f".{root.name}.tfk8s-parts-*"))
    record_path = Path(records) / "part-0.json"
    record = json.loads(record_path.read_text())
    item = record["items"][0]
    item["mtime"] += 3600.0
    item["checksum"]["bytes"] = "0" * len(item["checksum"]["bytes"])
    record_path.write_text(json.dumps(record))
    assert item["path"].startswith(str(root))  # the pods mount the volume where the worker does
    with pytest.raises(StagingError, match=f"{item['path']} changed since the listing"):
        task.sums_ended({"ti": ti}, event)
    assert not (root / MANIFEST_NAME).exists()
    assert leftovers(root, k8s_cluster.core_v1, sums_env) == ([], [])


class Killer(threading.Thread):
    """Kills the first checksum pod of part 0 (SIGKILL) once its journal lists some, not all, of its files.

    A part of this size takes well under a second, too short to hit by polling: the pod's process is
    stopped (SIGSTOP) as soon as it runs and let go in 10 ms steps until its journal lists a file."""

    def __init__(self, nodeagent, namespace: str, root: Path, files_in_part: int):
        super().__init__(daemon=True)
        self.nodeagent, self.namespace, self.root, self.files = nodeagent, namespace, root, files_in_part
        self.killed: list[str] = []
        self.seen = -1
        self.stop = threading.Event()

    def _progress(self) -> tuple[int, bool]:
        parts = glob.glob(str(self.root.parent / f".{self.root.name}.tfk8s-parts-*"))
        journals = [j for d in parts for j in glob.glob(f"{d}/part-0.*.journal")]
        done = Path(journals[0]).read_text().count("\n") if journals else 0
        return done, any(Path(d, "part-0.json").exists() for d in parts)

    def run(self):
        while not self.stop.is_set():
            for pidfile in glob.glob(str(self.nodeagent.pods_dir / self.namespace / "*-p0-a0" / "copy.pid")):
                pod = Path(pidfile).parent.name
                pid = self.nodeagent.pid(self.namespace, pod, "copy")
                if not pid:
                    continue
                os.kill(pid, signal.SIGSTOP)
                done, recorded = self._progress()
                while done == 0 and not recorded and self.nodeagent.pid(self.namespace, pod, "copy"):
                    os.kill(pid, signal.SIGCONT)
                    time.sleep(0.01)
                    os.kill(pid, signal.SIGSTOP)
                    done, recorded = self._progress()
                self.seen = done
                if 1 <= done < self.files and not recorded:
                    os.kill(pid, signal.SIGKILL)
                    self.killed.append(pod)
                else:
                    os.kill(pid, signal.SIGCONT)
                return
            time.sleep(0.01)


def test_killed_checksum_pod_retries_only_its_part(sums_env, gluster_dir, nodeagent, k8s_cluster, airflow_db):
    root = gluster_dir / "big"
    write_input(root, [8 * MiB] * 24)  # three parts of eight files
    from tfk8s_airflow.staging.glusterfs import GlusterVolume
    from tfk8s_airflow.staging.stage import stage_volume

    local = stage_volume(GlusterVolume(), str(root), 2, manifest_path=str(gluster_dir / "local.json"))
    local_doc = read_local(local["manifest"])

    killer = Killer(nodeagent, sums_env, root, 8)
    watcher = Watcher(k8s_cluster.core_v1, sums_env, root)
    killer.start()
    watcher.start()
    dr = run("kubernetes", input=str(root), workers=2)
    killer.stop.set()
    watcher.stop.set()
    killer.join()
    watcher.join()
    assert killer.killed, f"part 0 was not caught mid-part ({killer.seen} files digested; pods {sorted(watcher.pods)})"
    assert states(dr) == {"stage": "success"}
    retried = sorted(p for p in watcher.pods if not p.endswith("-a0"))
    assert retried and all(p.endswith("-p0-a1") for p in retried), sorted(watcher.pods)
    retry_log = "".join(Path(f).read_text() for f in glob.glob(
        f"{nodeagent.logs_dir}/{sums_env}_{retried[0]}_*/copy/*.log"))
    assert "part 0: resuming, " in retry_log, retry_log[-2000:]
    # The pod's last progress line states its part's totals; the trigger reads its bytes and items only.
    from tfk8s_airflow.pod.stagecopy import PROGRESS_PREFIX
    from tfk8s_airflow.triggers.staging import _last_progress

    line = [t for t in retry_log.splitlines() if t.startswith(PROGRESS_PREFIX)][-1]
    totals = json.loads(line[len(PROGRESS_PREFIX):])
    assert totals["total_items"] == 8 and totals["total_bytes"] > 0
    assert _last_progress(retry_log) == {"bytes": totals["total_bytes"], "items": totals["total_items"]}
    doc = read_local(root / MANIFEST_NAME)
    local_doc["created"] = doc["created"] = None
    assert doc == local_doc  # complete: every file's digest, the same shards
    assert leftovers(root, k8s_cluster.core_v1, sums_env) == ([], [])


def test_cancel_deletes_the_checksum_pods_and_writes_no_manifest(sums_env, gluster_dir, nodeagent, k8s_cluster,
                                                                  airflow_db):
    """The operator starts its pods and defers; the task is then cancelled while they read. Airflow (3.3+)
    calls the deferred task's trigger's ``on_kill`` for a user's kill; the test calls it at that point."""
    root = gluster_dir / "cancel"
    write_input(root, [32 * MiB] * 12)
    _task, _ti, trigger = deferred_task(root, "cancelled")
    core = k8s_cluster.core_v1
    wait_until(lambda: [p.metadata.name for p in core.list_namespaced_pod(sums_env).items
                        if nodeagent.pid(sums_env, p.metadata.name, "copy")], 60, "a checksum pod running", 0.05)
    asyncio.run(trigger.on_kill())
    wait_until(lambda: not core.list_namespaced_pod(sums_env).items, 60, "the checksum pods gone after the cancel", 0.5)

    def alive():
        return {k: p for k, p in nodeagent.pids(sums_env).items() if Path(f"/proc/{p}").exists()}

    wait_until(lambda: alive() == {}, 30, "the checksum processes gone after the cancel", 0.5,
               on_fail=lambda: str(alive()))
    assert not (root / MANIFEST_NAME).exists(), "a cancelled pass wrote a manifest"


def test_auto_uses_pods_from_the_deployment_threshold(sums_env, gluster_dir, nodeagent, k8s_cluster, airflow_db):
    """The plain GlusterFS scenario (``copy_executor`` left at ``"auto"``): pods for an input of at least
    ``staging_threshold`` (1 MiB here), the task's own pass below it; the same manifest either way."""
    import pendulum

    big, small = gluster_dir / "big", gluster_dir / "small"
    write_input(big, [600_000, 600_000])
    write_input(small, [1000, 2000])
    for root, pods in ((big, True), (small, False)):
        watcher = Watcher(k8s_cluster.core_v1, sums_env, root)
        watcher.start()
        dr = scenarios().stage_gluster.test(run_conf={"input": str(root), "workers": 2},
                                            logical_date=pendulum.parse(DS))
        watcher.stop.set()
        watcher.join()
        assert states(dr) == {"stage": "success"}
        assert bool(watcher.pods) is pods, (root, watcher.pods)
        assert read_local(root / MANIFEST_NAME)["total_files"] == 2
