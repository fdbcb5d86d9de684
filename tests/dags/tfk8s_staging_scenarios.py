"""Scenario DAGs for the staging tests, run with dag.test(run_conf=...).

Paths come from ``params`` so each test points them at its own fresh HDFS and GlusterFS
directories; the WebHDFS connection is ``webhdfs_default`` (the devstack fixture exports it).
"""
from __future__ import annotations

import pendulum
from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import DAG, Param

from tfk8s_airflow.operators.setup import normalize_shards
from tfk8s_airflow.operators.staging import GlusterFSStageOperator, HdfsStageOperator
from tfk8s_airflow.sensors.hdfs import HdfsPartitionSensor

START = pendulum.datetime(2026, 1, 1, tz="UTC")


def _hand_off(staged):
    """What the job group's setup does with the staging output."""
    shards = normalize_shards(staged)
    return {"workers": sorted(shards), "files": sum(len(v) for v in shards.values())}


PARAMS = {"root": Param("/tmp", type="string"), "cache": Param("", type="string"),
          "workers": Param(3, type="integer", minimum=1)}

# wait for the partition -> stage (copy onto the GlusterFS cache) -> hand the shards on
with DAG("tfk8s_t_stage_hdfs", schedule=None, start_date=START, catchup=False,
         params=PARAMS, tags=["tfk8s-test"]) as stage_hdfs:
    wait = HdfsPartitionSensor(task_id="wait", path="{{ params.root }}/clicks/dt={{ ds }}",
                               mode="poke", poke_interval=1, timeout=60)
    stage = HdfsStageOperator(task_id="stage", input_path="{{ params.root }}/clicks/dt={{ ds }}",
                              num_workers="{{ params.workers }}", cache_dir="{{ params.cache }}",
                              parallelism=2)
    wait >> stage >> PythonOperator(task_id="hand_off", python_callable=_hand_off,
                                    op_args=[stage.output])

# the sensor alone, with a short timeout (poke mode, and deferrable in the triggerer)
for _mode in ("poke", "deferrable"):
    with DAG(f"tfk8s_t_partition_sensor_{_mode}", schedule=None, start_date=START, catchup=False,
             params={"path": Param("/tmp/none", type="string")}, tags=["tfk8s-test"]) as _dag:
        HdfsPartitionSensor(task_id="wait", path="{{ params.path }}", poke_interval=1, timeout=8,
                            mode="poke", deferrable=_mode == "deferrable")
    globals()[f"partition_sensor_{_mode}"] = _dag

with DAG("tfk8s_t_stage_gluster", schedule=None, start_date=START, catchup=False,
         params={"input": Param("", type="string"), "workers": Param(2, type="integer")},
         tags=["tfk8s-test"]) as stage_gluster:
    GlusterFSStageOperator(task_id="stage", input_path="{{ params.input }}",
                           num_workers="{{ params.workers }}", retries=3)

# the copy as a fan-out of copy pods (the deployment's [tfk8s] staging_* settings come from the
# test's environment, TFK8S_STAGING_*), and "auto", which chooses by the deployment's threshold
for _executor, _pods in (("kubernetes", 3), ("auto", 2)):
    with DAG(f"tfk8s_t_stage_pods_{_executor}", schedule=None, start_date=START, catchup=False,
             params={"input": Param("/tmp", type="string"), "cache": Param("", type="string"),
                     "workers": Param(2, type="integer")}, tags=["tfk8s-test"]) as _dag:
        HdfsStageOperator(task_id="stage", input_path="{{ params.input }}", num_workers="{{ params.workers }}",
                          cache_dir="{{ params.cache }}", copy_executor=_executor, copy_pods=_pods)
    globals()[f"stage_pods_{_executor}"] = _dag

# files already on the volume: the checksum pass as a fan-out of checksum pods ("kubernetes") or in the task
# ("local"); no task retries, so a failure is the test's outcome
for _executor in ("kubernetes", "local"):
    with DAG(f"tfk8s_t_stage_gluster_pods_{_executor}", schedule=None, start_date=START, catchup=False,
             params={"input": Param("/tmp", type="string"), "workers": Param(2, type="integer")},
             tags=["tfk8s-test"]) as _dag:
        GlusterFSStageOperator(task_id="stage", input_path="{{ params.input }}", num_workers="{{ params.workers }}",
                               copy_executor=_executor, copy_pods=3)
    globals()[f"stage_gluster_pods_{_executor}"] = _dag
