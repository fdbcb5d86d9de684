"""Staging through copy pods with a Kerberos WebHDFS connection: a real KDC and a real Kerberized
HDFS (``devstack/up hdfs-secure``: MiniKdc, SPNEGO on WebHDFS, block access tokens), the real
kube-apiserver and pods on the devstack's real node, through ``dag.test()`` as in test_stage_pods.py.

The Airflow side (this process) authenticates with the user's keytab (``KRB5_CLIENT_KTNAME``: MIT
Kerberos gets the ticket from it); the copy pods hold no Kerberos credentials, only the delegation
token the task put in a Secret, referenced by ``secretKeyRef``.
"""
from __future__ import annotations

import asyncio
import base64
import json
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.fixtures.data import HDFS_UP_TIMEOUT_S, _up
from tests.fixtures.realnode import REAL_NODE_SELECTOR, REAL_NODE_TOLERATIONS
from tests.staging.test_stage_pods import DS, MiB, comparable, hidden_and_pods, run, states, write_partition
from tfk8s_airflow.k8s.tokensecret import KEY
from tfk8s_airflow.staging.glusterfs import GlusterVolume as StageVolume
from tfk8s_airflow.staging.manifest import MANIFEST_NAME, read_local
from tfk8s_airflow.staging.stage import stage_hdfs
from tfk8s_airflow.staging.webhdfs import WebHdfs, WebHdfsConfig

pytestmark = [pytest.mark.airflow, pytest.mark.hdfs, pytest.mark.gluster, pytest.mark.k8s]
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def secure_hdfs() -> dict[str, str]:
    """The devstack's KDC and Kerberized HDFS (started when down); what ``devstack/env hdfs-secure``
    prints."""
    return _up("hdfs-secure", HDFS_UP_TIMEOUT_S,
               {"TFK8S_SECURE_WEBHDFS_URL", "TFK8S_SECURE_HDFS_USER", "TFK8S_KRB5_CONFIG", "TFK8S_KRB5_USER_KEYTAB"})


@pytest.fixture
def kerberos_pods_env(monkeypatch, tmp_path, secure_hdfs, realnode, k8s_namespace, gluster_volume):
    """This process as the Kerberos user (its keytab), a Kerberos WebHDFS connection, the deployment's
    staging settings for the test's namespace; yields (namespace, the user's WebHdfs, an HDFS dir)."""
    monkeypatch.setenv("KRB5_CONFIG", secure_hdfs["TFK8S_KRB5_CONFIG"])
    monkeypatch.setenv("KRB5_CLIENT_KTNAME", secure_hdfs["TFK8S_KRB5_USER_KEYTAB"])
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{tmp_path / 'krb5cc'}")
    url = urllib.parse.urlsplit(secure_hdfs["TFK8S_SECURE_WEBHDFS_URL"])
    assert url.hostname == realnode.host_name  # the pods reach the NameNode (and SPNEGO names it) there
    user = secure_hdfs["TFK8S_SECURE_HDFS_USER"]
    monkeypatch.setenv("AIRFLOW_CONN_WEBHDFS_DEFAULT", json.dumps(
        {"conn_type": "webhdfs", "host": url.hostname, "port": url.port, "login": user,
         "extra": {"kerberos": True}}))
    monkeypatch.setenv("TFK8S_STAGING_IMAGE", realnode.image)  # the training image holds the pod side
    realnode.grant_pull(k8s_namespace)
    monkeypatch.setenv("TFK8S_STAGING_NAMESPACE", k8s_namespace)
    monkeypatch.setenv("TFK8S_STAGING_THRESHOLD", "1Mi")
    monkeypatch.setenv("TFK8S_STAGING_POD_TEMPLATE", json.dumps({
        "nodeSelector": REAL_NODE_SELECTOR, "tolerations": REAL_NODE_TOLERATIONS}))
    hdfs = WebHdfs(WebHdfsConfig(urls=(secure_hdfs["TFK8S_SECURE_WEBHDFS_URL"],), user=user, kerberos=True))
    path = f"/tmp/tfk8s-tests/krb-{uuid.uuid4().hex[:8]}"
    hdfs.client.makedirs(path)
    yield k8s_namespace, hdfs, path
    hdfs.client.delete(path, recursive=True)


def token_works(base_url: str, token: str) -> bool:
    """A WebHDFS call authenticated by the delegation token alone (no Kerberos): True when HDFS
    accepts it, False when it refuses the token."""
    query = urllib.parse.urlencode({"op": "GETFILESTATUS", "delegation": token})
    try:
        with urllib.request.urlopen(f"{base_url}/webhdfs/v1/tmp?{query}", timeout=10) as resp:
            return resp.status == 200 and b"FileStatus" in resp.read()
    except urllib.error.HTTPError as exc:
        assert exc.code in (401, 403), exc
        return False


class SecretWatcher(threading.Thread):
    """Samples, while a copy runs, the copy pods' specs and the token in the task's Secret."""

    def __init__(self, core, namespace: str, base_url: str):
        super().__init__(daemon=True)
        self.core, self.namespace, self.base_url = core, namespace, base_url
        self.pods: dict[str, dict] = {}
        self.secrets: dict[str, str] = {}   # name -> token
        self.token_worked: dict[str, bool] = {}
        self.stop = threading.Event()

    def run(self):
        api = self.core.api_client
        while not self.stop.is_set():
            for pod in self.core.list_namespaced_pod(self.namespace).items:
                self.pods[pod.metadata.name] = api.sanitize_for_serialization(pod)
            for s in self.core.list_namespaced_secret(self.namespace).items:
                if s.metadata.name.startswith("tfk8s-stage-") and s.data and KEY in s.data:
                    token = base64.b64decode(s.data[KEY]).decode()
                    self.secrets[s.metadata.name] = token
                    if s.metadata.name not in self.token_worked:
                        self.token_worked[s.metadata.name] = token_works(self.base_url, token)
            time.sleep(0.2)


def secrets_left(core, namespace: str) -> list[str]:
    return [s.metadata.name for s in core.list_namespaced_secret(namespace).items
            if s.metadata.name.startswith("tfk8s-stage-")]


def test_kerberos_pods_copy_byte_identical_token_in_secret_then_cancelled(
        kerberos_pods_env, secure_hdfs, gluster_dir, realnode, k8s_cluster, airflow_db, capfd, caplog):
    namespace, hdfs, base = kerberos_pods_env
    part = f"{base}/clicks/dt={DS}"
    written = write_partition(hdfs.client, part, [5 * MiB + 17, 3 * MiB, 0, 1] + [40_000 + i for i in range(12)])
    local_cache = gluster_dir / "local"
    local = stage_hdfs(hdfs, part, 2, volume=StageVolume(), cache_dir=str(local_cache))

    cache = gluster_dir / "pods"
    url = secure_hdfs["TFK8S_SECURE_WEBHDFS_URL"]
    watcher = SecretWatcher(k8s_cluster.core_v1, namespace, url)
    watcher.start()
    dr = run("tfk8s_t_stage_pods_kubernetes", input=part, cache=str(cache), workers=2)
    watcher.stop.set()
    watcher.join()
    assert states(dr) == {"stage": "success"}

    # The copy went through pods, byte-identical to the local copy, the same manifest.
    assert watcher.pods and all(p.startswith("tfk8s-stage-") for p in watcher.pods)
    for name, data in written.items():
        assert (cache / name).read_bytes() == data, name
        assert (local_cache / name).read_bytes() == data, name
    assert comparable(read_local(cache / MANIFEST_NAME), str(cache)) == \
        comparable(read_local(local_cache / MANIFEST_NAME), str(local_cache))
    assert local["files"] == len(written)

    # One Secret for the task, holding a token HDFS accepted while the pods copied.
    assert len(watcher.secrets) == 1, watcher.secrets
    (name, token), = watcher.secrets.items()
    key = next(iter(watcher.pods)).split("-")[2]
    assert name.startswith(f"tfk8s-stage-{key}-hdfs-") and len(name) == len(f"tfk8s-stage-{key}-hdfs-") + 8
    assert watcher.token_worked[name] is True
    # The pods read it by reference only: no token value anywhere in their specs.
    for pod_name, pod in watcher.pods.items():
        assert token not in json.dumps(pod), pod_name
        env = {e["name"]: e for e in pod["spec"]["containers"][0]["env"]}
        assert env["TFK8S_HDFS_DELEGATION"] == {
            "name": "TFK8S_HDFS_DELEGATION", "valueFrom": {"secretKeyRef": {"name": name, "key": KEY}}}
        assert "TFK8S_HDFS_DELEGATION" not in json.dumps(env["TFK8S_COPY_PART"])
    # After the task: no pod, no Secret, nothing hidden left, and the token is cancelled.
    hidden, left = hidden_and_pods(cache, k8s_cluster.core_v1, namespace)
    assert hidden == [] and left == []
    assert secrets_left(k8s_cluster.core_v1, namespace) == []
    assert token_works(url, token) is False
    # Nor in the task's log (what dag.test() printed and logged).
    out, err = capfd.readouterr()
    assert "delegation token for the copy pods in Secret" in out + err + caplog.text
    assert token not in out + err + caplog.text


def setattr_all(task, values) -> None:
    task.input_path, task.cache_dir, task.num_workers = values


def test_cancelled_kerberos_copy_deletes_the_secret_and_cancels_the_token(
        kerberos_pods_env, secure_hdfs, gluster_dir, realnode, k8s_cluster, airflow_db, request):
    """The operator issues the token, starts its pods and defers; the task is then cancelled
    (the trigger's ``on_kill``, as Airflow 3.3+ calls it on a kill) while the pods copy."""
    from airflow.sdk.exceptions import TaskDeferred

    sys.path.insert(0, str(REPO / "tests" / "dags"))
    import tfk8s_staging_scenarios as scenarios

    namespace, hdfs, base = kerberos_pods_env
    part = f"{base}/cancel/dt={DS}"
    write_partition(hdfs.client, part, [6 * MiB] * 6, block_mib=4)
    cache = gluster_dir / "pods"
    task = scenarios.stage_pods_kubernetes.get_task("stage")
    # The scenario DAG is shared with other tests in this process: its templates are put back after.
    saved = task.input_path, task.cache_dir, task.num_workers
    request.addfinalizer(lambda: setattr_all(task, saved))
    task.input_path, task.cache_dir, task.num_workers = part, str(cache), 2
    ti = SimpleNamespace(dag_id="tfk8s_t_stage_pods_kubernetes", run_id=f"krb-cancel-{uuid.uuid4().hex[:6]}",
                         task_id="stage", map_index=-1)
    with pytest.raises(TaskDeferred) as deferred:
        task.execute({"ti": ti})
    trigger = deferred.value.trigger
    core = k8s_cluster.core_v1
    (name,) = secrets_left(core, namespace)
    token = base64.b64decode(core.read_namespaced_secret(name, namespace).data[KEY]).decode()
    assert token not in json.dumps(trigger.serialize()[1])  # the triggerer's table never holds it
    url = secure_hdfs["TFK8S_SECURE_WEBHDFS_URL"]
    assert token_works(url, token) is True
    assert core.list_namespaced_pod(namespace).items

    assert token_renewable(hdfs, url, token) is True  # the NameNode's answer for a live token
    asyncio.run(trigger.on_kill())
    assert secrets_left(core, namespace) == []
    assert token_works(url, token) is False and token_renewable(hdfs, url, token) is False
    deadline = time.monotonic() + 60
    while core.list_namespaced_pod(namespace).items and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not core.list_namespaced_pod(namespace).items, "copy pods left after the cancel"
    assert not cache.exists(), "a cancelled copy published something"


def _scenario_task(request, part: str, cache):
    """The shared scenario DAG's stage task pointed at this test's partition and cache; put back after."""
    sys.path.insert(0, str(REPO / "tests" / "dags"))
    import tfk8s_staging_scenarios as scenarios

    task = scenarios.stage_pods_kubernetes.get_task("stage")
    saved = task.input_path, task.cache_dir, task.num_workers
    request.addfinalizer(lambda: setattr_all(task, saved))
    task.input_path, task.cache_dir, task.num_workers = part, str(cache), 2
    return task


def _deferred(task, ti):
    from airflow.sdk.exceptions import TaskDeferred

    with pytest.raises(TaskDeferred) as deferred:
        task.execute({"ti": ti})
    return deferred.value.trigger


def test_a_secret_labelled_like_ours_but_not_the_tasks_is_never_read_cancelled_or_deleted(
        kerberos_pods_env, secure_hdfs, gluster_dir, k8s_cluster, airflow_db, request):
    """Never adopt: a Secret carrying the task's labels that its lease does not own (someone else's, or a
    forgery) is neither read, cancelled, replaced nor deleted, while the task's own Secret (a name nobody could
    predict) is."""
    from tfk8s_airflow.k8s.copypods import copy_key

    namespace, hdfs, base = kerberos_pods_env
    part = f"{base}/foreign/dt={DS}"
    write_partition(hdfs.client, part, [6 * MiB] * 4, block_mib=4)
    task = _scenario_task(request, part, gluster_dir / "pods")
    run_id = f"krb-foreign-{uuid.uuid4().hex[:6]}"
    key = copy_key("tfk8s_t_stage_pods_kubernetes", run_id, "stage", -1)
    core = k8s_cluster.core_v1
    forged = f"tfk8s-stage-{key}-hdfs-forged00"
    labels = {"tfk8s.io/staging": key, "tfk8s.io/secret": "hdfs-delegation",
              "app.kubernetes.io/managed-by": "tfk8s-airflow", "app.kubernetes.io/component": "staging"}
    foreign = base64.b64encode(b"someone else's").decode()
    core.create_namespaced_secret(namespace, {"metadata": {"name": forged, "labels": labels}, "data": {KEY: foreign}})
    ti = SimpleNamespace(dag_id="tfk8s_t_stage_pods_kubernetes", run_id=run_id, task_id="stage", map_index=-1)
    trigger = _deferred(task, ti)
    (own,) = [n for n in secrets_left(core, namespace) if n != forged]
    asyncio.run(trigger.on_kill())
    assert secrets_left(core, namespace) == [forged]  # the task's own went, the other stayed
    kept = core.read_namespaced_secret(forged, namespace)
    assert kept.data == {KEY: foreign} and kept.metadata.labels == labels and own != forged


def test_a_new_try_cancels_the_earlier_tries_token_before_it_issues_its_own(
        kerberos_pods_env, secure_hdfs, gluster_dir, k8s_cluster, airflow_db, request):
    """A try that died without cleaning up (a worker lost mid-copy) left its Secret and a live token; the next
    try of the same task cancels that token and deletes its Secret before it issues its own."""
    namespace, hdfs, base = kerberos_pods_env
    part = f"{base}/retry/dt={DS}"
    write_partition(hdfs.client, part, [6 * MiB] * 4, block_mib=4)
    task = _scenario_task(request, part, gluster_dir / "pods")
    ti = SimpleNamespace(dag_id="tfk8s_t_stage_pods_kubernetes", run_id=f"krb-retry-{uuid.uuid4().hex[:6]}",
                         task_id="stage", map_index=-1)
    core, url = k8s_cluster.core_v1, secure_hdfs["TFK8S_SECURE_WEBHDFS_URL"]
    _deferred(task, ti)  # the first try: its trigger never runs (the worker was lost)
    (first,) = secrets_left(core, namespace)
    first_token = base64.b64decode(core.read_namespaced_secret(first, namespace).data[KEY]).decode()
    assert token_works(url, first_token) is True
    trigger = _deferred(task, ti)  # the second try of the same task
    (second,) = secrets_left(core, namespace)
    assert second != first and token_works(url, first_token) is False
    second_token = base64.b64decode(core.read_namespaced_secret(second, namespace).data[KEY]).decode()
    asyncio.run(trigger.on_kill())
    assert secrets_left(core, namespace) == [] and token_works(url, second_token) is False


def test_a_kerberos_copy_refuses_the_jobs_default_namespace_before_anything_is_made(
        kerberos_pods_env, gluster_dir, k8s_cluster, airflow_db, request, monkeypatch):
    namespace, hdfs, base = kerberos_pods_env
    monkeypatch.setenv("AIRFLOW__TFK8S__DEFAULT_NAMESPACE", namespace)
    part = f"{base}/samens/dt={DS}"
    write_partition(hdfs.client, part, [2 * MiB])
    task = _scenario_task(request, part, gluster_dir / "pods")
    ti = SimpleNamespace(dag_id="tfk8s_t_stage_pods_kubernetes", run_id=f"krb-ns-{uuid.uuid4().hex[:6]}",
                         task_id="stage", map_index=-1)
    with pytest.raises(Exception, match=r"\[tfk8s\] staging_namespace"):
        task.execute({"ti": ti})
    core = k8s_cluster.core_v1
    assert secrets_left(core, namespace) == [] and core.list_namespaced_pod(namespace).items == []


def test_killed_kerberos_copy_pod_is_retried_with_the_same_secret(
        kerberos_pods_env, secure_hdfs, gluster_dir, realnode, k8s_cluster, airflow_db):
    """A part whose pod was killed gets a new pod; the Secret (owned by no pod) outlives the killed one,
    the new pod reads the same token through it, and the copy completes."""
    import glob

    from tests.staging.test_stage_pods import Watcher

    namespace, hdfs, base = kerberos_pods_env
    part = f"{base}/big/dt={DS}"
    written = write_partition(hdfs.client, part, [2 * MiB] * 30, block_mib=4)
    cache = gluster_dir / "pods"
    killed: list[str] = []
    secrets_at_kill: list[list[str]] = []

    def kill_first_part(names):
        for name in names:
            if name.endswith("-p0-a0") and realnode.pid(namespace, name, "copy"):
                journal = glob.glob(str(cache.parent / f".{cache.name}.tfk8s-parts-*" / "part-0.*.journal"))
                verified = Path(journal[0]).read_text().count("\n") if journal else 0
                if verified >= 1:
                    realnode.kill(namespace, name, "copy")
                    killed.append(name)
                    secrets_at_kill.append(secrets_left(k8s_cluster.core_v1, namespace))
                    return True
        return False

    watcher = Watcher(k8s_cluster.core_v1, namespace, cache, act=kill_first_part)
    secret_watcher = SecretWatcher(k8s_cluster.core_v1, namespace, secure_hdfs["TFK8S_SECURE_WEBHDFS_URL"])
    watcher.start()
    secret_watcher.start()
    dr = run("tfk8s_t_stage_pods_kubernetes", input=part, cache=str(cache), workers=3)
    watcher.stop.set()
    secret_watcher.stop.set()
    watcher.join()
    secret_watcher.join()
    assert killed, f"the copy ended before part 0 could be killed (pods seen: {sorted(watcher.pods)})"
    assert states(dr) == {"stage": "success"}
    retried = sorted(p for p in watcher.pods if not p.endswith("-a0"))
    assert retried and all(p.endswith("-p0-a1") for p in retried), sorted(watcher.pods)
    assert len(secrets_at_kill[0]) == 1 and len(secret_watcher.secrets) == 1  # one Secret, one token throughout
    (name,) = secret_watcher.secrets
    for pod_name in retried:
        env = {e["name"]: e for e in secret_watcher.pods[pod_name]["spec"]["containers"][0]["env"]}
        assert env["TFK8S_HDFS_DELEGATION"]["valueFrom"]["secretKeyRef"]["name"] == name
    for rel, data in written.items():
        assert (cache / rel).read_bytes() == data, rel
    assert secrets_left(k8s_cluster.core_v1, namespace) == []
    assert token_works(secure_hdfs["TFK8S_SECURE_WEBHDFS_URL"], secret_watcher.secrets[name]) is False


def token_renewable(hdfs: WebHdfs, base_url: str, token: str) -> bool:
    """Ask the NameNode (SPNEGO, as the token's renewer) to renew ``token``: True while it lives, False once it
    was cancelled (HDFS answers ``InvalidToken``: the token is in no cache any more)."""
    resp = hdfs.client._session.put(f"{base_url}/webhdfs/v1/", params={"op": "RENEWDELEGATIONTOKEN", "token": token},
                                    timeout=10)
    if resp.status_code == 200:
        return True
    assert resp.status_code in (400, 403) and "InvalidToken" in resp.text, (resp.status_code, resp.text[:300])
    return False


#: Where the kill lands: the step whose end it follows (the module attribute the task calls there).
KILL_STEPS = {
    "token-issued-no-secret-yet": "tfk8s_airflow.staging.delegation.obtain",
    "secret-made-no-pods-yet": "tfk8s_airflow.k8s.tokensecret.create",
    "pods-copying-not-deferred": "tfk8s_airflow.k8s.copypods.create",
}


@pytest.mark.parametrize("step", sorted(KILL_STEPS))
def test_a_task_killed_at_each_step_leaves_neither_secret_nor_live_token(
        step, kerberos_pods_env, secure_hdfs, gluster_dir, k8s_cluster, airflow_db, request, monkeypatch):
    """A kill as Airflow 3 delivers it: SIGTERM, whose handler calls the task's ``on_kill`` and returns, so
    ``execute`` goes on where it was. The signal is sent to this process right after one step of the task
    (the real step runs; the test only chooses the moment). After it: the task raised (it never defers), no
    Secret, pod or lease of the task is left, nothing was made after the kill, and every token the task
    obtained is cancelled (RENEWDELEGATIONTOKEN refuses it). The kill after the task deferred is the trigger's
    ``on_kill`` (test_cancelled_kerberos_copy_deletes_the_secret_and_cancels_the_token)."""
    import importlib
    import os
    import signal

    from kubernetes import client as k8s

    from tfk8s_airflow.exceptions import StagingError

    namespace, hdfs, base = kerberos_pods_env
    part = f"{base}/kill-{step}/dt={DS}"
    write_partition(hdfs.client, part, [6 * MiB] * 4, block_mib=4)
    task = _scenario_task(request, part, gluster_dir / "pods")
    ti = SimpleNamespace(dag_id="tfk8s_t_stage_pods_kubernetes", run_id=f"krb-kill-{uuid.uuid4().hex[:6]}",
                         task_id="stage", map_index=-1)
    tokens: list[str] = []
    made_after_kill: list[str] = []
    killed = threading.Event()

    def on_term(signum, frame):  # Airflow's task runner: on_kill, then back to where the task was
        task.on_kill()

    previous = signal.signal(signal.SIGTERM, on_term)
    request.addfinalizer(lambda: signal.signal(signal.SIGTERM, previous))
    # The instance is the shared scenario DAG's: a kill must not outlive this test.
    request.addfinalizer(lambda: task.__dict__.pop("_tfk8s_killed", None))

    def spy(target: str, kill: bool):
        module_name, attr = target.rsplit(".", 1)
        module = importlib.import_module(module_name)
        original = getattr(module, attr)

        def wrapper(*args, **kwargs):
            if killed.is_set():
                made_after_kill.append(attr)
            result = original(*args, **kwargs)
            if attr == "obtain":
                tokens.append(result)
            if kill and not killed.is_set():
                killed.set()
                os.kill(os.getpid(), signal.SIGTERM)
            return result
        monkeypatch.setattr(module, attr, wrapper)

    for target in set(KILL_STEPS.values()):
        spy(target, kill=target == KILL_STEPS[step])

    try:
        task.execute({"ti": ti})
        ended: BaseException | None = None
    except BaseException as exc:  # judged last: what the kill left matters first
        ended = exc
    (token,) = tokens
    core, url = k8s_cluster.core_v1, secure_hdfs["TFK8S_SECURE_WEBHDFS_URL"]
    batch = k8s.BatchV1Api(k8s_cluster.api_client)
    assert killed.is_set()
    assert token_renewable(hdfs, url, token) is False and token_works(url, token) is False
    assert secrets_left(core, namespace) == []
    assert made_after_kill == [], f"made after the kill: {made_after_kill}"
    assert isinstance(ended, StagingError) and "the task was killed" in str(ended), repr(ended)
    deadline = time.monotonic() + 60  # pods and the lease go through the garbage collector
    while (core.list_namespaced_pod(namespace).items or batch.list_namespaced_job(namespace).items) \
            and time.monotonic() < deadline:
        time.sleep(0.5)
    assert core.list_namespaced_pod(namespace).items == []
    assert batch.list_namespaced_job(namespace).items == []
    assert secrets_left(core, namespace) == []


def test_a_lease_that_ran_out_took_the_secret_and_the_task_still_cancels_the_token(
        kerberos_pods_env, secure_hdfs, gluster_dir, k8s_cluster, airflow_db, request):
    """The lease runs out while no triggerer renews it: Kubernetes deletes the lease Job (the TTL controller does
    it at the deadline; here the test deletes it the same way, background propagation) and the garbage collector
    the Secret, with the token in it. The task kept its token's handle (no credential: HDFS refuses it as
    ``delegation=``); when the copy ends (here: its trigger's error event) the handle cancels the token."""
    from kubernetes import client as k8s

    from tfk8s_airflow.exceptions import StagingError
    from tfk8s_airflow.staging.lease import lease_name

    namespace, hdfs, base = kerberos_pods_env
    part = f"{base}/expired/dt={DS}"
    write_partition(hdfs.client, part, [6 * MiB] * 4, block_mib=4)
    task = _scenario_task(request, part, gluster_dir / "pods")
    ti = SimpleNamespace(dag_id="tfk8s_t_stage_pods_kubernetes", run_id=f"krb-expired-{uuid.uuid4().hex[:6]}",
                         task_id="stage", map_index=-1)
    trigger = _deferred(task, ti)
    core, url = k8s_cluster.core_v1, secure_hdfs["TFK8S_SECURE_WEBHDFS_URL"]
    (name,) = secrets_left(core, namespace)
    token = base64.b64decode(core.read_namespaced_secret(name, namespace).data[KEY]).decode()
    handle = trigger.state["token_handle"]
    assert token not in json.dumps(trigger.serialize()[1]) and handle != token
    assert token_works(url, handle) is False  # the handle authenticates nobody

    k8s.BatchV1Api(k8s_cluster.api_client).delete_namespaced_job(
        lease_name(trigger.key), namespace, propagation_policy="Background")
    deadline = time.monotonic() + 60
    while secrets_left(core, namespace) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert secrets_left(core, namespace) == [], "the garbage collector left the Secret of a lease that ran out"
    assert token_renewable(hdfs, url, token) is True  # gone with its Secret, still live

    with pytest.raises(StagingError, match="waiting for the copy pods failed"):
        task.copy_ended({"ti": ti}, {"status": "error", "message": "the lease ran out", "state": trigger.state})
    assert token_renewable(hdfs, url, token) is False and token_works(url, token) is False
