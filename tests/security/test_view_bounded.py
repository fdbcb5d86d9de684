"""The TF jobs view's request for a job's pods is bounded, never retried, and shared by concurrent pages.

Against a silent socket (a loopback listener that accepts every connection and never answers, as a
stuck API server or a black-holed route does): the LIST ends with an error within its bound (before:
still blocked after 100 s, then retried), the listener sees one connection (no retry), and eight
pages asking at once for the same job share that one request. A last test lists a real API server
through the same path, so the bound does not hide a LIST that never works.
"""
from __future__ import annotations

import json
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from tfk8s_airflow.job.builders.objects import JobNames, plan_replicas
from tfk8s_airflow.job.run.judge import JobPolicy
from tfk8s_airflow.job.run.resolve import job_record
from tfk8s_airflow.job.spec import parse_spec
from tfk8s_airflow.ui import sources
from tfk8s_airflow.ui.bounded import ViewRequestError, list_pods_bounded

BOUND_S = 2.0
SLACK_S = 3.0  # a loaded CI machine; the old behaviour is unbounded, so any finite slack separates them


class SilentServer:
    """Accepts connections on loopback, reads nothing, answers nothing; counts them."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.accepted: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted.append(conn)

    def close(self) -> None:
        self.sock.close()
        for c in self.accepted:
            c.close()


@pytest.fixture
def silent(monkeypatch, tmp_path):
    server = SilentServer()
    kubeconfig = tmp_path / "silent.kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "silent",
        "clusters": [{"name": "silent", "cluster": {"server": f"http://127.0.0.1:{server.port}"}}],
        "contexts": [{"name": "silent", "context": {"cluster": "silent", "user": "u"}}],
        "users": [{"name": "u", "user": {"token": "t"}}]}))
    monkeypatch.setenv("AIRFLOW_CONN_TFK8S_SILENT", json.dumps(
        {"conn_type": "kubernetes", "extra": {"kube_config_path": str(kubeconfig)}}))
    monkeypatch.setattr(sources, "VIEW_REQUEST_TIMEOUT_S", BOUND_S)
    monkeypatch.setattr(sources, "_cache", {})
    monkeypatch.setattr(sources, "_lists", sources.SingleFlight())
    from tfk8s_airflow.k8s.client import api_client

    api_client("tfk8s_silent")  # the provider's first import and connection lookup (seconds): not the request's
    yield server
    server.close()


def record(conn_id: str, namespace: str = "ns", run: str = "view"):
    spec = parse_spec({"name": "view", "namespace": namespace, "image": "tfk8s/trainer:0.1", "ps": 1,
                                "worker": 2})
    names = JobNames.for_run(spec, run)
    return job_record(spec, names, plan_replicas(spec, names), policy=JobPolicy.from_spec(spec), has_shards=False,
                      kubernetes_conn_id=conn_id, poll_interval=1.0)


def test_a_list_against_a_silent_socket_fails_within_its_bound_once(silent):
    t0 = time.monotonic()
    with pytest.raises(ViewRequestError):
        list_pods_bounded("tfk8s_silent", "ns", "tfk8s.io/job=x", timeout=BOUND_S)
    took = time.monotonic() - t0
    assert BOUND_S * 0.8 <= took < BOUND_S + SLACK_S, took
    assert len(silent.accepted) == 1  # no retry


def test_concurrent_pages_share_one_bounded_request(silent):
    rec = record("tfk8s_silent")
    t0 = time.monotonic()
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: sources.live_replicas(rec), range(8)))
    took = time.monotonic() - t0
    assert answers == [None] * 8  # the rows show what the records give
    assert took < BOUND_S + SLACK_S, took
    assert sources._lists.calls == 1 and len(silent.accepted) == 1, (sources._lists.calls, len(silent.accepted))
    t1 = time.monotonic()
    assert sources.live_replicas(rec) is None  # the failure is kept like an answer: no new request
    assert time.monotonic() - t1 < 0.5 and len(silent.accepted) == 1


@pytest.mark.k8s
def test_the_bounded_list_reads_a_real_api_server(k8s_cluster, k8s_namespace, monkeypatch):
    import os

    monkeypatch.setenv("AIRFLOW_CONN_TFK8S_REAL", json.dumps(
        {"conn_type": "kubernetes", "extra": {"kube_config_path": os.environ["KUBECONFIG"]}}))
    monkeypatch.setattr(sources, "_cache", {})
    rec = record("tfk8s_real", k8s_namespace)
    k8s_cluster.core_v1.create_namespaced_pod(k8s_namespace, {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": rec.replicas[0].pod, "labels": {**dict(p.split("=") for p in rec.selector.split(",")),
                                                            "tfk8s.io/role": "ps", "tfk8s.io/index": "0"}},
        "spec": {"nodeSelector": {"type": "none"}, "containers": [{"name": "tensorflow", "image": "x"}]}})
    live = sources.live_replicas(rec)
    assert live is not None and live["ps-0"]["phase"] == "Pending", live


def test_a_page_of_many_jobs_on_a_dead_cluster_is_bounded_as_a_whole(silent, monkeypatch):
    """Before: each job of a page asked the dead cluster in turn (``?limit=500``: 500 bounded requests, ~40 min);
    now the page stops asking a connection that failed, and spends at most its budget on LISTs in all."""
    from tfk8s_airflow.ui.rows import JobSources

    jobs = [JobSources(dag_id="d", run_id=f"r{i}", run_state="running", prefix="train.",
                       record=record("tfk8s_silent", namespace=f"ns{i}")) for i in range(20)]
    t0 = time.monotonic()
    shown = sources.with_live(jobs)
    took = time.monotonic() - t0
    assert [j.live for j in shown] == [None] * 20  # each row shows what its records give
    assert took < BOUND_S + SLACK_S, took  # one bounded request, not twenty
    assert len(silent.accepted) == 1


@pytest.mark.k8s
def test_a_page_lists_the_pods_of_a_bounded_number_of_running_jobs(k8s_cluster, k8s_namespace, monkeypatch):
    """Before: a page listed the pods of every running job it showed (``?limit=500``: 500 LISTs at each
    refresh of each open page); now of :data:`~tfk8s_airflow.ui.sources.PAGE_MAX_POD_LISTS` at most, the
    jobs past it showing what their records give. Against a real API server, so every LIST answers."""
    import os

    from tfk8s_airflow.ui.rows import JobSources

    monkeypatch.setenv("AIRFLOW_CONN_TFK8S_REAL", json.dumps(
        {"conn_type": "kubernetes", "extra": {"kube_config_path": os.environ["KUBECONFIG"]}}))
    monkeypatch.setattr(sources, "_cache", {})
    monkeypatch.setattr(sources, "_lists", sources.SingleFlight())
    bound = sources.PAGE_MAX_POD_LISTS
    assert bound == 50
    jobs = [JobSources(dag_id="d", run_id=f"r{i}", run_state="running", prefix="train.",
                       record=record("tfk8s_real", k8s_namespace, run=f"r{i}")) for i in range(bound + 10)]
    assert len({j.record.selector for j in jobs}) == len(jobs)  # a LIST of its own for each job
    shown = sources.with_live(jobs, budget_s=600.0)  # the time budget is another bound's (above)
    assert sources._lists.calls == bound, sources._lists.calls
    assert [j.live for j in shown] == [{}] * bound + [None] * 10  # listed (no pods), then the records' view
