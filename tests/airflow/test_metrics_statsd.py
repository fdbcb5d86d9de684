"""The package's metrics reach a real StatsD listener during real job runs (KWOK pods, dag.test()).

A UDP socket on loopback plays the StatsD server; Airflow's ``[metrics]`` points at it (``statsd_on``), as a
deployment configures it. A job whose workers are preempted once (KWOK's ``tfk8s-pod-fault`` stage) and then
succeed sends its admission wait, time to Running, a restart of class infrastructure per preempted worker,
its duration and outcome, and teardown's leftovers (0); a local staging task sends its bytes and MiB/s. The
names received are exactly catalogue names (tfk8s_airflow.metricnames), under Airflow's ``statsd_prefix``.
"""
from __future__ import annotations

import socket
import sys
import threading
from pathlib import Path

import pytest

from tests.airflow.test_recovery_kwok import spec
from tests.airflow.test_tfjob_k8s import leftovers, run_dag
from tests.dagrun import states, xcom
from tfk8s_airflow import metrics
from tfk8s_airflow.metricnames import BY_NAME

pytestmark = [pytest.mark.k8s, pytest.mark.airflow]
REPO = Path(__file__).resolve().parents[2]


class StatsdListener:
    """A StatsD server's receiving end: every datagram's lines (``name:value|type``) kept."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.lines: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                data = self.sock.recv(65535)
            except TimeoutError:
                continue
            self.lines += data.decode(errors="replace").splitlines()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()

    def received(self, prefix: str = "airflow.") -> dict[str, list[tuple[float, str]]]:
        """tfk8s metric name -> [(value, type)], for the lines of the package's own metrics."""
        out: dict[str, list[tuple[float, str]]] = {}
        for line in self.lines:
            name, _, rest = line.partition(":")
            if not name.startswith(prefix + "tfk8s."):
                continue
            value, _, kind = rest.partition("|")
            out.setdefault(name[len(prefix):], []).append((float(value), kind.split("|")[0]))
        return out


@pytest.fixture
def statsd(monkeypatch):
    listener = StatsdListener()
    monkeypatch.setenv("AIRFLOW__METRICS__STATSD_ON", "True")
    monkeypatch.setenv("AIRFLOW__METRICS__STATSD_HOST", "127.0.0.1")
    monkeypatch.setenv("AIRFLOW__METRICS__STATSD_PORT", str(listener.port))
    metrics.reset()
    yield listener
    metrics.reset()
    listener.close()


def test_a_recovered_job_sends_its_metrics_to_statsd(k8s_cluster, k8s_namespace, airflow_db, statsd):
    doc = spec(k8s_namespace, worker={"annotations": {"tfk8s.io/sim-duration": "6s", "tfk8s.io/sim-fault": "preempt",
                                                      "tfk8s.io/sim-fault-after": "1s"}})
    dr = run_dag("tfk8s_t_from_conf", k8s_namespace, spec=doc)
    assert dr.state == "success", states(dr)
    got = statsd.received()
    assert set(got) <= set(BY_NAME), set(got) - set(BY_NAME)
    assert [kind for _, kind in got["tfk8s.job.admission_wait"]] == ["ms"]
    assert [kind for _, kind in got["tfk8s.job.time_to_running"]] == ["ms"]
    assert got["tfk8s.job.restarts"] == [(1.0, "c"), (1.0, "c")]  # each preempted worker replaced once
    (duration,) = got["tfk8s.job.duration"]
    assert duration[1] == "ms" and duration[0] >= 6000  # the workers ran 6 s at least
    assert got["tfk8s.job.outcome"] == [(1.0, "c")]
    summary = xcom(dr, "train.wait", "summary")
    exited = [k for k, r in summary["replicas"].items() if r["phase"] in ("Succeeded", "Failed")]
    assert "worker-0" in exited and "ps-0" not in exited  # worker-1 may still run: the policy needs worker 0
    assert got["tfk8s.replica.exits"] == [(1.0, "c")] * len(exited)
    assert got["tfk8s.teardown.leftovers"] == [(0.0, "g")]
    assert leftovers(k8s_cluster.core_v1, k8s_namespace) == []


def test_metrics_carry_their_tags_where_statsd_takes_them(k8s_cluster, k8s_namespace, airflow_db, statsd,
                                                          monkeypatch):
    """With ``statsd_influxdb_enabled`` Airflow's StatsD client appends the tags to the name (Telegraf's
    InfluxDB format): the job's dag and job name, and the verdict's outcome and class (the task's id too in
    a triggerer, which gives the trigger its task instance; dag.test() does not)."""
    monkeypatch.setenv("AIRFLOW__METRICS__STATSD_INFLUXDB_ENABLED", "True")
    metrics.reset()
    doc = spec(k8s_namespace, worker={"annotations": {"tfk8s.io/sim-duration": "2s"}})
    dr = run_dag("tfk8s_t_from_conf", k8s_namespace, spec=doc)
    assert dr.state == "success", states(dr)
    outcome = [line for line in statsd.lines if line.startswith("airflow.tfk8s.job.outcome,")]
    assert len(outcome) == 1, statsd.lines
    tags = dict(t.split("=", 1) for t in outcome[0].split(":")[0].split(",")[1:])
    assert tags["dag"] == "tfk8s_t_from_conf"
    assert tags["outcome"] == "succeeded" and tags["class"] == "none" and tags["job"].startswith("tfk8s-t-from-conf-")


def test_a_local_staging_task_sends_its_bytes(gluster_dir, airflow_db, statsd):
    sys.path.insert(0, str(REPO / "tests" / "dags"))
    import tfk8s_staging_scenarios

    src = gluster_dir / "in"
    src.mkdir()
    for i in range(3):
        (src / f"part-{i}").write_bytes(b"x" * 1000 * (i + 1))
    dr = tfk8s_staging_scenarios.stage_gluster.test(run_conf={"input": str(src), "workers": 2})
    assert dr.state == "success", states(dr)
    got = statsd.received()
    assert got["tfk8s.staging.bytes"] == [(6000.0, "c")]
