"""Staging through real Airflow (dag.test): sensor, operators, XCom hand-off, failures."""
from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

import pendulum
import pytest

from tfk8s_airflow.staging.manifest import MANIFEST_NAME, read_local

pytestmark = [pytest.mark.airflow, pytest.mark.hdfs]
REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "dags"))
DS = "2026-03-04"


def run(dag_id: str, **conf):
    import tfk8s_staging_scenarios as scenarios

    dag = next(d for d in vars(scenarios).values() if getattr(d, "dag_id", None) == dag_id)
    return dag.test(run_conf=conf, logical_date=pendulum.parse(DS))


def states(dr):
    return {ti.task_id: ti.state for ti in dr.get_task_instances()}


def xcom(dr, task_id):
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        row = session.query(XComModel).filter_by(dag_id=dr.dag_id, run_id=dr.run_id,
                                                 task_id=task_id, key="return_value").first()
        value = row.value if row else None
    return json.loads(value) if isinstance(value, str) else value


def _later(delay, fn):
    thread = threading.Timer(delay, fn)
    thread.start()
    return thread


@pytest.mark.gluster
def test_sensor_waits_for_success_then_stage_and_hand_off(airflow_db, hdfs_server, hdfs_dir,
                                                          gluster_dir):
    client = hdfs_server.client()
    part = f"{hdfs_dir}/clicks/dt={DS}"
    for i, size in enumerate([5000, 120_000, 7, 64_000, 0]):
        client.write(f"{part}/part-{i}", data=bytes([i]) * size)
    writer = _later(4, lambda: client.write(f"{part}/_SUCCESS", data=b""))  # lands later
    started = time.monotonic()
    dr = run("tfk8s_t_stage_hdfs", root=hdfs_dir, cache=str(gluster_dir / "cache"), workers=2)
    writer.join()
    assert states(dr) == {"wait": "success", "stage": "success", "hand_off": "success"}
    assert time.monotonic() - started >= 4  # it waited for the marker
    staged = xcom(dr, "stage")
    assert staged["files"] == 5 and staged["bytes"] == 189_007 and staged["copied"] == 5
    assert staged["manifest"] == str(gluster_dir / "cache" / MANIFEST_NAME)
    assert read_local(staged["manifest"])["shards"] == staged["shards"]
    assert xcom(dr, "hand_off") == {"workers": ["worker-0", "worker-1"], "files": 5}


@pytest.mark.gluster
def test_stage_empty_partition_fails_without_retry(airflow_db, hdfs_server, hdfs_dir,
                                                     gluster_dir):
    import tfk8s_staging_scenarios as scenarios

    client = hdfs_server.client()
    client.write(f"{hdfs_dir}/clicks/dt={DS}/_SUCCESS", data=b"")  # complete but empty
    dr = run("tfk8s_t_stage_hdfs", root=hdfs_dir, cache=str(gluster_dir / "cache"))
    assert states(dr)["stage"] == "failed"
    assert not (gluster_dir / "cache" / MANIFEST_NAME).exists()
    assert scenarios.stage_hdfs.get_task("stage").retries == 0


@pytest.mark.serial  # it bounds its own wall time
@pytest.mark.parametrize("mode", ["poke", "deferrable"])
def test_sensor_times_out_cleanly(airflow_db, hdfs_server, hdfs_dir, mode):
    hdfs_server.client().makedirs(f"{hdfs_dir}/never")  # exists, but _SUCCESS never comes
    started = time.monotonic()
    dr = run(f"tfk8s_t_partition_sensor_{mode}", path=f"{hdfs_dir}/never")
    elapsed = time.monotonic() - started
    assert states(dr) == {"wait": "failed"}
    assert 8 <= elapsed < 60


def test_deferrable_sensor_succeeds_when_marker_lands(airflow_db, hdfs_server, hdfs_dir):
    client = hdfs_server.client()
    client.makedirs(f"{hdfs_dir}/later")
    writer = _later(3, lambda: client.write(f"{hdfs_dir}/later/_SUCCESS", data=b""))
    dr = run("tfk8s_t_partition_sensor_deferrable", path=f"{hdfs_dir}/later")
    writer.join()
    assert states(dr) == {"wait": "success"}


def test_partition_trigger_says_what_it_waits_for_and_how_long_is_left(airflow_db, hdfs_server, hdfs_dir, capsys):
    """The deferrable sensor's trigger, run here as the triggerer runs it (its log on stdout)."""
    import asyncio
    import re
    from dataclasses import asdict

    from tfk8s_airflow.connections import webhdfs_config
    from tfk8s_airflow.job.run.records import TriggerOutcome
    from tfk8s_airflow.job.states import EndState
    from tfk8s_airflow.triggers.hdfs import HdfsPartitionTrigger

    hdfs_server.client().makedirs(f"{hdfs_dir}/pending")  # exists, _SUCCESS never comes
    config = asdict(webhdfs_config())
    config["urls"] = list(config["urls"])
    trigger = HdfsPartitionTrigger(path=f"{hdfs_dir}/pending", marker="_SUCCESS", config=config,
                                   poll_interval=0.5, deadline=time.time() + 5)
    capsys.readouterr()
    event = asyncio.run(trigger.run().__anext__())
    out = capsys.readouterr().out
    outcome = TriggerOutcome.from_payload(event.payload)  # the package's shared event record
    assert (outcome.kind, outcome.state) == ("partition", EndState.TIMED_OUT), event.payload
    assert "pending exists but its marker _SUCCESS does not yet" in outcome.reason
    left = [int(x) for x in re.findall(r"pending exists but its marker _SUCCESS does not yet \((-?\d+)s left before "
                                       r"the sensor's timeout\)", out)]
    assert len(left) >= 2 and left == sorted(left, reverse=True) and left[0] <= 5, out[-3000:]


@pytest.mark.gluster
def test_gluster_stage_operator(airflow_db, gluster_dir, hdfs_server):
    data = gluster_dir / "dt=1"
    data.mkdir()
    for i in range(7):
        (data / f"part-{i}").write_bytes(b"z" * (1000 * (i + 1)))
    (data / "_SUCCESS").write_bytes(b"")
    dr = run("tfk8s_t_stage_gluster", input=str(data), workers=3)
    assert states(dr) == {"stage": "success"}
    staged = xcom(dr, "stage")
    manifest = read_local(data / MANIFEST_NAME)
    assert staged["files"] == 7 and manifest["files"][0]["checksum"]["algorithm"] == "SHA256"
    # path traversal: a permanent failure (no retries used although retries=3)
    dr = run("tfk8s_t_stage_gluster", input=f"{gluster_dir}/../../../etc", workers=3)
    ti = dr.get_task_instances()[0]
    assert ti.state == "failed" and ti.try_number == 1
