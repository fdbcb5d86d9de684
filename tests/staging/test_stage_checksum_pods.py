"""Staging files already on GlusterFS with a fan-out of checksum pods (``GlusterFSStageOperator``,
``copy_executor="kubernetes"``): the real GlusterFS mount, kube-apiserver and pods on the devstack's
real node, through ``dag.test()`` (the trigger runs inline) or the operator's and trigger's own calls.

The checksum pods run :mod:`tfk8s_airflow.pod.stagesum` of the training image (``[tfk8s] staging_image``)
on the real node (the deployment's ``staging_pod_template``), reading the GlusterFS mount (hostPath).
"""
from __future__ import annotations

import asyncio
import contextlib
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

from tests.fixtures.realnode import REAL_NODE_SELECTOR, REAL_NODE_TOLERATIONS, is_program
from tests.staging.test_stage_pods import Watcher, comparable, states
from tfk8s_airflow.staging.manifest import MANIFEST_NAME, read_local

pytestmark = [pytest.mark.airflow, pytest.mark.gluster, pytest.mark.k8s]
REPO = Path(__file__).resolve().parents[2]
MiB = 1 << 20
DS = "2026-03-04"


@pytest.fixture
def sums_env(monkeypatch, realnode, k8s_namespace, gluster_volume):
    """The deployment's staging settings for the test's namespace: the training image, on the real node."""
    monkeypatch.setenv("TFK8S_STAGING_IMAGE", realnode.image)  # the training image holds the pod side
    realnode.grant_pull(k8s_namespace)
    monkeypatch.setenv("TFK8S_STAGING_NAMESPACE", k8s_namespace)
    monkeypatch.setenv("TFK8S_STAGING_THRESHOLD", "1Mi")
    monkeypatch.setenv("TFK8S_STAGING_POD_TEMPLATE", json.dumps({
        "nodeSelector": REAL_NODE_SELECTOR, "tolerations": REAL_NODE_TOLERATIONS}))
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


def test_checksum_pods_write_the_local_manifest(sums_env, gluster_dir, realnode, k8s_cluster, airflow_db):
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
    logs = "\n".join(line for pod in sorted(watcher.pods) for line in realnode.container_log(sums_env, pod, "copy"))
    assert logs.count("bytes digested (sha256)") == 3, logs[-2000:]
    assert leftovers(root, k8s_cluster.core_v1, sums_env) == ([], [])


def test_file_changed_after_listing_fails_naming_it(sums_env, gluster_dir, realnode, k8s_cluster, airflow_db):
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


def test_forged_record_fails_naming_the_file(sums_env, gluster_dir, realnode, k8s_cluster, airflow_db):
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

    A part of this size (8 files of 8 MiB, hashed in milliseconds each) takes well under a second, too
    short to hit by polling: the container's cgroup is read until its program runs (never ``runc init``,
    which becomes the program when it executes it: stopping that stalls the start), the program is
    stopped (SIGSTOP) at once and let run in 10 ms SIGCONT steps, its cgroup read again while it is
    stopped, until its journal shows 1 to 7 files digested. ``diagnostics`` says what it saw."""

    def __init__(self, realnode, namespace: str, root: Path, files_in_part: int):
        super().__init__(daemon=True)
        self.realnode, self.namespace, self.root, self.files = realnode, namespace, root, files_in_part
        self.killed: list[str] = []
        self.seen = -1
        self.diagnostics: list[str] = []
        self.stop = threading.Event()

    def _container(self) -> tuple[str, Path] | None:
        """(pod, its copy container's cgroup.procs) of part 0's first pod, once the container exists."""
        for c in self.realnode.containers(self.namespace, ended=True):
            labels = c.get("labels") or {}
            pod = labels.get("io.kubernetes.pod.name", "")
            if pod.endswith("-p0-a0") and labels.get("io.kubernetes.container.name") == "copy":
                path = self.realnode.cgroup_procs_path(c)
                if path is not None:
                    return pod, path
                self.diagnostics.append(f"{pod}: container {c['id'][:12]} ({c.get('state')}) has no cgroup")
        return None

    @staticmethod
    def _programs(procs: Path) -> list[int]:
        try:
            return [p for p in (int(x) for x in procs.read_text().split()) if is_program(p)]
        except (FileNotFoundError, ValueError):
            return []

    @staticmethod
    def _signal(pids: list[int], sig: int) -> None:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)

    def _progress(self) -> tuple[int, bool]:
        parts = glob.glob(str(self.root.parent / f".{self.root.name}.tfk8s-parts-*"))
        journals = [j for d in parts for j in glob.glob(f"{d}/part-0.*.journal")]
        done = Path(journals[0]).read_text().count("\n") if journals else 0
        return done, any(Path(d, "part-0.json").exists() for d in parts)

    def run(self):
        found = None
        while not self.stop.is_set() and found is None:
            found = self._container()
            if found is None:
                time.sleep(0.02)
        if found is None:
            self.diagnostics.append("no copy container of part 0's first pod was seen")
            return
        pod, procs = found
        programs: list[int] = []
        while not self.stop.is_set() and not programs and procs.exists():
            programs = self._programs(procs)  # a tight loop: the program must not get far
        if not programs:
            self.diagnostics.append(f"{pod}: its program was never seen in {procs}")
            return
        self._signal(programs, signal.SIGSTOP)
        done, recorded = self._progress()
        self.diagnostics.append(f"{pod}: stopped {programs} with {done} files digested")
        steps = 0
        while done == 0 and not recorded and programs and steps < 3000:
            self._signal(programs, signal.SIGCONT)
            time.sleep(0.01)
            self._signal(programs, signal.SIGSTOP)
            programs = self._programs(procs)  # read while it is stopped: children included, the ended gone
            self._signal(programs, signal.SIGSTOP)
            done, recorded = self._progress()
            steps += 1
        self.seen = done
        self.diagnostics.append(f"{pod}: after {steps} steps of 10 ms: {done} files digested, "
                                f"record written: {recorded}, programs {programs}")
        if programs and 1 <= done < self.files and not recorded:
            self._signal(programs, signal.SIGKILL)
            self.killed.append(pod)
        else:
            self._signal(programs, signal.SIGCONT)


def test_killed_checksum_pod_retries_only_its_part(sums_env, gluster_dir, realnode, k8s_cluster, airflow_db):
    root = gluster_dir / "big"
    write_input(root, [8 * MiB] * 24)  # three parts of eight files
    from tfk8s_airflow.staging.glusterfs import GlusterVolume
    from tfk8s_airflow.staging.stage import stage_volume

    local = stage_volume(GlusterVolume(), str(root), 2, manifest_path=str(gluster_dir / "local.json"))
    local_doc = read_local(local["manifest"])

    killer = Killer(realnode, sums_env, root, 8)
    watcher = Watcher(k8s_cluster.core_v1, sums_env, root)
    killer.start()
    watcher.start()
    dr = run("kubernetes", input=str(root), workers=2)
    killer.stop.set()
    watcher.stop.set()
    killer.join()
    watcher.join()
    assert killer.killed, (f"part 0 was not caught mid-part ({killer.seen} files digested; pods "
                           f"{sorted(watcher.pods)}): {killer.diagnostics}")
    assert states(dr) == {"stage": "success"}
    retried = sorted(p for p in watcher.pods if not p.endswith("-a0"))
    assert retried and all(p.endswith("-p0-a1") for p in retried), sorted(watcher.pods)
    retry_log = "\n".join(realnode.container_log(sums_env, retried[0], "copy"))
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


def test_cancel_deletes_the_checksum_pods_and_writes_no_manifest(sums_env, gluster_dir, realnode, k8s_cluster,
                                                                  airflow_db):
    """The operator starts its pods and defers; the task is then cancelled while they read. Airflow (3.3+)
    calls the deferred task's trigger's ``on_kill`` for a user's kill; the test calls it at that point."""
    root = gluster_dir / "cancel"
    write_input(root, [32 * MiB] * 12)
    _task, _ti, trigger = deferred_task(root, "cancelled")
    core = k8s_cluster.core_v1
    deadline = time.monotonic() + 60
    running: list[str] = []
    while time.monotonic() < deadline and not running:
        running = [p.metadata.name for p in core.list_namespaced_pod(sums_env).items
                   if realnode.pid(sums_env, p.metadata.name, "copy")]
        time.sleep(0.05)
    assert running, "no checksum pod ran within 60s"
    asyncio.run(trigger.on_kill())
    deadline = time.monotonic() + 60
    while core.list_namespaced_pod(sums_env).items and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not core.list_namespaced_pod(sums_env).items, "checksum pods left after the cancel"

    realnode.assert_nothing_running(sums_env)  # no checksum program, container or sandbox left
    assert not (root / MANIFEST_NAME).exists(), "a cancelled pass wrote a manifest"


def test_auto_uses_pods_from_the_deployment_threshold(sums_env, gluster_dir, realnode, k8s_cluster, airflow_db):
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
