"""Staging through a fan-out of copy pods (``copy_executor="kubernetes"``): real HDFS, GlusterFS,
kube-apiserver and pods on the devstack's real node, through ``dag.test()`` (the trigger runs inline).

The copy pods run :mod:`tfk8s_airflow.pod.stagecopy` of the training image (``[tfk8s] staging_image``;
the devstack builds it from this checkout's pod side) on the real node (the deployment's
``staging_pod_template``), reading WebHDFS at the host's name (which the node's CoreDNS resolves to
the host address) and writing the GlusterFS mount (hostPath).
"""
from __future__ import annotations

import glob
import json
import os
import threading
import time
import urllib.request
from pathlib import Path

import pendulum
import pytest

from tests.fixtures.realnode import REAL_NODE_SELECTOR, REAL_NODE_TOLERATIONS
from tfk8s_airflow.staging.glusterfs import GlusterVolume as StageVolume
from tfk8s_airflow.staging.manifest import MANIFEST_NAME, read_local
from tfk8s_airflow.staging.stage import stage_hdfs
from tfk8s_airflow.staging.webhdfs import WebHdfs, WebHdfsConfig

pytestmark = [pytest.mark.airflow, pytest.mark.hdfs, pytest.mark.gluster, pytest.mark.k8s]
REPO = Path(__file__).resolve().parents[2]
MiB = 1 << 20
DS = "2026-03-04"


@pytest.fixture
def pods_env(monkeypatch, realnode, k8s_namespace, hdfs_server, gluster_volume):
    """The deployment's staging settings for the test's namespace, and a WebHDFS connection by the
    host's name (the Airflow side and the pods both reach the NameNode there)."""
    realnode.grant_pull(k8s_namespace)
    port = hdfs_server.url.rsplit(":", 1)[1]
    monkeypatch.setenv("AIRFLOW_CONN_WEBHDFS_DEFAULT", json.dumps(
        {"conn_type": "webhdfs", "host": realnode.host_name, "port": int(port), "login": hdfs_server.user}))
    monkeypatch.setenv("TFK8S_STAGING_IMAGE", realnode.image)  # the training image holds the pod side
    monkeypatch.setenv("TFK8S_STAGING_NAMESPACE", k8s_namespace)
    monkeypatch.setenv("TFK8S_STAGING_THRESHOLD", "1Mi")
    monkeypatch.setenv("TFK8S_STAGING_POD_TEMPLATE", json.dumps({
        "nodeSelector": REAL_NODE_SELECTOR, "tolerations": REAL_NODE_TOLERATIONS}))
    return k8s_namespace


def hdfs_client(hdfs_server, realnode):
    return WebHdfs(WebHdfsConfig(urls=(f"http://{realnode.host_name}:{hdfs_server.url.rsplit(':', 1)[1]}",),
                                 user=hdfs_server.user))


def write_partition(client, part: str, sizes: list[int], block_mib: int = 1) -> dict[str, bytes]:
    out = {}
    for i, size in enumerate(sizes):
        data = os.urandom(size)
        name = f"sub{i % 2}/part-{i:05d}"
        client.write(f"{part}/{name}", data=data, overwrite=True, blocksize=block_mib * MiB)
        out[name] = data
    client.write(f"{part}/_SUCCESS", data=b"", overwrite=True)
    return out


def run(dag_id: str, **conf):
    import sys

    sys.path.insert(0, str(REPO / "tests" / "dags"))
    import tfk8s_staging_scenarios as scenarios

    dag = next(d for d in vars(scenarios).values() if getattr(d, "dag_id", None) == dag_id)
    return dag.test(run_conf=conf, logical_date=pendulum.parse(DS))


def states(dr):
    return {ti.task_id: ti.state for ti in dr.get_task_instances()}


def hidden_and_pods(cache: Path, core, namespace: str) -> tuple[list[str], list[str]]:
    hidden = [p.name for p in cache.parent.iterdir() if p.name.startswith(f".{cache.name}.") and "lock" not in p.name]
    pods = [p.metadata.name for p in core.list_namespaced_pod(namespace).items]
    return hidden, pods


def comparable(doc: dict, root: str) -> dict:
    """A manifest without what differs between two copies of the same partition: when, and where."""
    doc = json.loads(json.dumps(doc).replace(root, "<root>"))
    doc.pop("created")
    return doc


class Watcher(threading.Thread):
    """Samples, while a copy runs, which copy pods exist and whether anything is visible at ``cache``."""

    def __init__(self, core, namespace: str, cache: Path, act=None):
        super().__init__(daemon=True)
        self.core, self.namespace, self.cache, self.act = core, namespace, cache, act
        self.pods: set[str] = set()
        self.visible_early: list[str] = []
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            names = {p.metadata.name for p in self.core.list_namespaced_pod(self.namespace).items}
            self.pods |= names
            if names and self.cache.exists() and not (self.cache / MANIFEST_NAME).exists():
                self.visible_early.append(str(sorted(os.listdir(self.cache))[:3]))
            if self.act is not None and self.act(names):
                self.act = None
            time.sleep(0.2)


def test_pods_copy_byte_identical_to_local_copy(pods_env, hdfs_server, hdfs_dir, gluster_dir, realnode,
                                                 k8s_cluster, airflow_db):
    client = hdfs_server.client()
    part = f"{hdfs_dir}/clicks/dt={DS}"
    written = write_partition(client, part, [5 * MiB + 17, 3 * MiB, 0, 1] + [40_000 + i for i in range(30)])
    hdfs = hdfs_client(hdfs_server, realnode)
    local_cache = gluster_dir / "local"
    local = stage_hdfs(hdfs, part, 2, volume=StageVolume(), cache_dir=str(local_cache))

    cache = gluster_dir / "pods"
    watcher = Watcher(k8s_cluster.core_v1, pods_env, cache)
    watcher.start()
    dr = run("tfk8s_t_stage_pods_kubernetes", input=part, cache=str(cache), workers=2)
    watcher.stop.set()
    watcher.join()
    assert states(dr) == {"stage": "success"}
    assert watcher.pods and all(p.startswith("tfk8s-stage-") for p in watcher.pods)
    assert len({p.rsplit("-a", 1)[0] for p in watcher.pods}) == 3  # three parts, one attempt each
    assert not watcher.visible_early, "files were visible before the manifest"
    for name, data in written.items():
        assert (cache / name).read_bytes() == data, name
        assert (local_cache / name).read_bytes() == data, name
    pods_doc = read_local(cache / MANIFEST_NAME)
    local_doc = read_local(local_cache / MANIFEST_NAME)
    assert comparable(pods_doc, str(cache)) == comparable(local_doc, str(local_cache))
    assert local["files"] == len(written)
    hidden, left = hidden_and_pods(cache, k8s_cluster.core_v1, pods_env)
    assert hidden == [] and left == []

    # A re-run copies nothing: every file is kept after its pod compared it with HDFS's checksum.
    dr = run("tfk8s_t_stage_pods_kubernetes", input=part, cache=str(cache), workers=2)
    assert states(dr) == {"stage": "success"}
    assert comparable(read_local(cache / MANIFEST_NAME), str(cache)) == comparable(local_doc, str(local_cache))
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        row = session.query(XComModel).filter_by(dag_id=dr.dag_id, run_id=dr.run_id, task_id="stage",
                                                 key="return_value").first()
        value = row.value if isinstance(row.value, dict) else json.loads(row.value)
    assert value["copied"] == 0 and value["skipped"] == len(written)


def test_killed_copy_pod_retries_only_its_part(pods_env, hdfs_server, hdfs_dir, gluster_dir, realnode,
                                               k8s_cluster, airflow_db):
    client = hdfs_server.client()
    part = f"{hdfs_dir}/big/dt={DS}"
    written = write_partition(client, part, [2 * MiB] * 48, block_mib=4)  # 16 items a part, 4 at a time
    cache = gluster_dir / "pods"
    killed: list[str] = []

    def kill_first_part(names):
        for name in names:
            if name.endswith("-p0-a0") and realnode.pid(pods_env, name, "copy"):
                journal = glob.glob(str(cache.parent / f".{cache.name}.tfk8s-parts-*" / "part-0.*.journal"))
                verified = Path(journal[0]).read_text().count("\n") if journal else 0
                record = glob.glob(str(cache.parent / f".{cache.name}.tfk8s-parts-*" / "part-0.json"))
                if 1 <= verified <= 10 and not record:  # mid-part: some items verified, at least 6 not yet
                    realnode.kill(pods_env, name, "copy")
                    killed.append(name)
                    return True
        return False

    watcher = Watcher(k8s_cluster.core_v1, pods_env, cache, act=kill_first_part)
    watcher.start()
    dr = run("tfk8s_t_stage_pods_kubernetes", input=part, cache=str(cache), workers=3)
    watcher.stop.set()
    watcher.join()
    assert killed, f"the copy ended before part 0 could be killed (pods seen: {sorted(watcher.pods)})"
    assert states(dr) == {"stage": "success"}
    retried = sorted(p for p in watcher.pods if not p.endswith("-a0"))
    assert retried and all(p.endswith("-p0-a1") for p in retried), sorted(watcher.pods)
    assert not watcher.visible_early
    retry_log = "\n".join(realnode.container_log(pods_env, retried[0], "copy"))
    assert "part 0: resuming, " in retry_log, retry_log[-2000:]
    # What the trigger reads for the task log's progress lines (bytes and items, from each pod's log).
    # The pod's last progress line states its part's totals; the trigger reads its bytes and items only.
    from tfk8s_airflow.pod.stagecopy import PROGRESS_PREFIX
    from tfk8s_airflow.triggers.staging import _last_progress

    line = [t for t in retry_log.splitlines() if t.startswith(PROGRESS_PREFIX)][-1]
    totals = json.loads(line[len(PROGRESS_PREFIX):])
    assert totals["total_items"] and totals["total_bytes"] > 0
    assert _last_progress(retry_log) == {"bytes": totals["total_bytes"], "items": totals["total_items"]}
    for name, data in written.items():
        assert (cache / name).read_bytes() == data, name
    doc = read_local(cache / MANIFEST_NAME)
    assert doc["total_files"] == 48
    hidden, left = hidden_and_pods(cache, k8s_cluster.core_v1, pods_env)
    assert hidden == [] and left == []


def test_corrupted_block_fails_the_part_and_publishes_nothing(pods_env, hdfs_server, hdfs_dir, gluster_dir,
                                                             realnode, k8s_cluster, airflow_db, capfd):
    client = hdfs_server.client()
    part = f"{hdfs_dir}/bad/dt={DS}"
    write_partition(client, part, [300_000, 200_000, 100_000])
    victim = f"{part}/sub0/part-00000"
    # A DataNode block altered on disk after the file was written (HDFS's own CRC check then fails).
    with urllib.request.urlopen(f"{hdfs_server.url}/webhdfs/v1{victim}?op=GET_BLOCK_LOCATIONS"
                                f"&user.name={hdfs_server.user}&offset=0&length=300000") as resp:
        block = json.loads(resp.read())["LocatedBlocks"]["locatedBlocks"][0]["block"]["blockId"]
    data_dir = hdfs_server.env.get("TFK8S_HDFS_DATA", "/var/tmp/tfk8s-devstack/hdfs/data")
    found = [f for f in glob.glob(f"{data_dir}/**/blk_{block}", recursive=True)]
    assert len(found) == 1, found
    raw = bytearray(Path(found[0]).read_bytes())
    raw[1234] ^= 0xFF
    Path(found[0]).write_bytes(raw)

    cache = gluster_dir / "pods"
    dr = run("tfk8s_t_stage_pods_kubernetes", input=part, cache=str(cache), workers=1)
    assert states(dr) == {"stage": "failed"}
    out = capfd.readouterr()
    assert f"checksum error reading {victim}" in out.out + out.err
    assert "copy part 0 (pod Failed) failed" not in out.out + out.err  # failed at once, not retried
    assert not cache.exists() or not any(cache.iterdir())
    hidden, left = hidden_and_pods(cache, k8s_cluster.core_v1, pods_env)
    assert hidden == [] and left == []


def test_cancelled_copy_deletes_the_pods_and_publishes_nothing(pods_env, hdfs_server, hdfs_dir, gluster_dir,
                                                               realnode, k8s_cluster, airflow_db, monkeypatch):
    """The operator starts its pods and defers; the task is then cancelled while they copy. Airflow
    (3.3+) calls the deferred task's trigger's ``on_kill`` for a user's kill (mark failed, the DAG run
    failed, clear); the test calls it at that point, with the real pods running."""
    import asyncio
    import sys
    from types import SimpleNamespace

    from airflow.sdk.exceptions import TaskDeferred

    sys.path.insert(0, str(REPO / "tests" / "dags"))
    import tfk8s_staging_scenarios as scenarios

    client = hdfs_server.client()
    part = f"{hdfs_dir}/cancel/dt={DS}"
    write_partition(client, part, [6 * MiB] * 12, block_mib=4)
    cache = gluster_dir / "pods"
    task = scenarios.stage_pods_kubernetes.get_task("stage")
    # The scenario DAG is shared with the other tests of this process: its templates are put back after.
    for name, value in (("input_path", part), ("cache_dir", str(cache)), ("num_workers", 2)):
        monkeypatch.setattr(task, name, value)
    ti = SimpleNamespace(dag_id="tfk8s_t_stage_pods_kubernetes", run_id="cancelled", task_id="stage", map_index=-1)
    with pytest.raises(TaskDeferred) as deferred:
        task.execute({"ti": ti})
    trigger = deferred.value.trigger
    core = k8s_cluster.core_v1
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # until a copy pod has verified part of its work
        journals = glob.glob(str(cache.parent / f".{cache.name}.tfk8s-parts-*" / "part-*.journal"))
        if any(Path(j).read_text().count("\n") for j in journals):
            break
        time.sleep(0.2)
    else:
        pytest.fail("no copy pod verified anything within 60s")
    assert core.list_namespaced_pod(pods_env).items
    asyncio.run(trigger.on_kill())
    deadline = time.monotonic() + 60
    while core.list_namespaced_pod(pods_env).items and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not core.list_namespaced_pod(pods_env).items, "copy pods left after the cancel"
    realnode.assert_nothing_running(pods_env)  # no copy program, container or sandbox left
    assert not cache.exists(), "a cancelled copy published something"
    visible = [p.name for p in cache.parent.iterdir() if not p.name.startswith(".")]
    assert visible == [], visible


def test_retraining_dag_stages_through_pods_above_the_threshold(pods_env, hdfs_server, gluster_dir, realnode,
                                                                k8s_cluster, airflow_db, monkeypatch):
    """dags/tfk8s_retrain.py unchanged: its stage task (copy_executor "auto", the default) copies
    through pods because the deployment's threshold (1 byte here) says so."""
    import importlib.util
    import subprocess
    import sys

    date = "2026-07-28"
    res = subprocess.run([sys.executable, str(REPO / "scripts" / "publish_dataset.py"), date],
                         env={**os.environ, "TFK8S_WEBHDFS_URL": hdfs_server.url,
                              "TFK8S_HDFS_USER": hdfs_server.user}, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    monkeypatch.setenv("TFK8S_ROOT", str(gluster_dir))
    monkeypatch.setenv("TFK8S_STAGING_THRESHOLD", "1")
    spec = importlib.util.spec_from_file_location("tfk8s_retrain_under_test", REPO / "dags" / "tfk8s_retrain.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    dag = module.daily.partial_subset(task_ids=["stage"], include_upstream=False, include_downstream=False) \
        if hasattr(module, "daily") else next(
            d for d in vars(module).values() if getattr(d, "dag_id", None) == "tfk8s_retrain_daily"
        ).partial_subset(task_ids=["stage"], include_upstream=False, include_downstream=False)
    cache = gluster_dir / "cache" / f"dt={date}"
    watcher = Watcher(k8s_cluster.core_v1, pods_env, cache)
    watcher.start()
    # Its Assets are not this test's (their lineage is tests/e2e/test_lineage.py's): the session's database may
    # hold them at the default root from an earlier test's parse, and Airflow would refuse the outlet as inactive.
    stage = dag.get_task("stage")
    stage.inlets, stage.outlets = [], []
    dr = dag.test(logical_date=pendulum.parse(date))
    watcher.stop.set()
    watcher.join()
    assert states(dr) == {"stage": "success"}
    assert watcher.pods, "the stage task did not copy through pods"
    doc = read_local(cache / MANIFEST_NAME)
    assert doc["total_files"] >= 1 and all(f["checksum"]["algorithm"].endswith("CRC32C") for f in doc["files"]
                                           if f["size"])
    for entry in doc["files"]:
        local = Path(entry["path"])
        assert local.stat().st_size == entry["size"]
