"""Scenario DAGs for the Kubernetes tests: one DAG per behaviour, run with dag.test().

Each takes the namespace from ``params`` so a test gives it a fresh one; KWOK
annotations (see devstack/components/k8s/README.md) make the simulated replicas
succeed, fail, restart or hang as the scenario needs.
"""
from __future__ import annotations

import time

import pendulum
from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import DAG, Param

from tfk8s_airflow.taskgroup import tf_job

START = pendulum.datetime(2026, 1, 1, tz="UTC")
NS = "{{ params.namespace }}"
KWOK = {"type": "kwok"}


def _record(**context):
    return {"evaluated": True}


def _now():
    """When the task's own code ran (the benchmark's one-task latency)."""
    return time.time()


def scenario(dag_id: str, spec: dict, **group_kwargs) -> DAG:
    with DAG(dag_id, schedule=None, start_date=START, catchup=False,
             params={"namespace": Param("default", type="string")}, tags=["tfk8s-test"]) as dag:
        train = tf_job("train", spec={"namespace": NS, "image": "tfk8s/trainer:0.1",
                                      "node_selector": KWOK, **spec},
                       poll_interval=1, **group_kwargs)
        train >> PythonOperator(task_id="evaluate", python_callable=_record)
    return dag


OK = {"tfk8s.io/sim-duration": "2s", "tfk8s.io/sim-exit-code": "0"}

ps_workers = scenario("tfk8s_t_ps_workers", {"name": "mnist", "ps": 1, "worker": {"replicas": 2, "annotations": OK}})
tf2 = scenario("tfk8s_t_tf2", {"name": "tf2", "chief": {"replicas": 1, "annotations": OK}, "ps": 1,
                               "worker": {"replicas": 2, "tracked": False}})
worker_fails = scenario("tfk8s_t_worker_fails", {
    "name": "fails", "ps": 1, "restart_policy": "Never",
    "worker": {"replicas": 2, "annotations": {"tfk8s.io/sim-duration": "2s", "tfk8s.io/sim-exit-code": "1"}}})
# The pre-flight would refuse it before anything exists ("no node has 8 nvidia.com/gpu"): off, so that the
# judge's own schedule_timeout is what is tested (a cluster whose pre-flight is off or only warns).
gpu = scenario("tfk8s_t_gpu_unschedulable", {
    "name": "gpu", "schedule_timeout": 4, "ps": 1,
    "worker": {"replicas": 1, "resources": {"cpu": "1", "nvidia.com/gpu": 8}}}, preflight="off")
image_pull = scenario("tfk8s_t_image_pull", {
    "name": "pull", "ps": 1, "worker": {"replicas": 1, "annotations": {"tfk8s.io/sim-image-pull": "fail"}}})
quota = scenario("tfk8s_t_quota", {"name": "quota", "ps": {"replicas": 1, "resources": {"cpu": "4"}},
                                   "worker": {"replicas": 4, "resources": {"cpu": "4"}}})
restarts = scenario("tfk8s_t_restarts", {
    "name": "restarts", "max_restarts": 1, "ps": 1,
    "worker": {"replicas": 1, "annotations": {"tfk8s.io/sim-duration": "1s", "tfk8s.io/sim-exit-code": "3"}}})
exit3 = scenario("tfk8s_t_exit3", {
    "name": "exit3", "ps": 1, "restart_policy": "Never",
    "worker": {"replicas": 2, "annotations": {"tfk8s.io/sim-duration": "6s", "tfk8s.io/sim-exit-code": "3"}}})
slow = scenario("tfk8s_t_slow", {"name": "slow", "ps": 1, "worker": {
    "replicas": 3, "annotations": {"tfk8s.io/sim-duration": "40s", "tfk8s.io/sim-exit-code": "0"}}})
# all_workers: the job succeeds only once every worker has, so each worker task ends with its own exit
# (under the default policy worker 0's exit ends the job and a worker a poll slower ends "not finished").
gang = scenario("tfk8s_t_gang", {"name": "gang", "ps": 1, "success_policy": "all_workers", "worker": {
    "replicas": 15, "annotations": {"tfk8s.io/sim-duration": "6s", "tfk8s.io/sim-exit-code": "0"}}})
forever = scenario("tfk8s_t_forever", {"name": "forever", "ps": 1, "worker": 1})  # nothing ever ends
scale = scenario("tfk8s_t_scale", {"name": "scale", "ps": 4, "worker": {"replicas": 60, "annotations": OK}})
# A TensorBoard pod beside the replicas (on the KWOK nodes it runs forever, like a PS); the workers run 10 s,
# long enough for a test to break the TensorBoard while the job trains.
tensorboard = scenario("tfk8s_t_tensorboard", {
    "name": "tb", "ps": 1, "tensorboard": True,
    "volumes": [{"name": "model", "mount_path": "/model", "host_path": "/mnt/tfk8s-gluster/tfk8s-kwok/tb"}],
    "worker": {"replicas": 2, "annotations": {"tfk8s.io/sim-duration": "10s", "tfk8s.io/sim-exit-code": "0"}}})
# tests/e2e/test_trigger_queue.py: the same job with its triggers on a triggerer queue of their own, and
# without (the control); workers that run 20 s, long enough to see which triggerer runs each trigger.
QUEUED = {"name": "queued", "ps": 1, "worker": {
    "replicas": 2, "annotations": {"tfk8s.io/sim-duration": "20s", "tfk8s.io/sim-exit-code": "0"}}}
trigger_queue = scenario("tfk8s_t_trigger_queue", QUEUED, trigger_queue="tfk8s-training")
trigger_default = scenario("tfk8s_t_trigger_default", QUEUED)

# The whole spec (and the shard assignments) from dag_run.conf / params, as the UI form or the REST API give them.
with DAG("tfk8s_t_from_conf", schedule=None, start_date=START, catchup=False,
         render_template_as_native_obj=True,
         params={"namespace": Param("default", type="string"), "spec": Param({}, type="object"),
                 "shards": Param({}, type="object")},
         tags=["tfk8s-test"]) as from_conf:
    tf_job("train", spec="{{ params.spec }}", shards="{{ params.shards }}", poll_interval=1) >> PythonOperator(
        task_id="evaluate", python_callable=_record)


# Benchmarks (benchmarks/launch.py --stack): the spec from the conf with a 5 s poll for many
# concurrent runs, and a single no-op task (what any first task costs on the stack).
with DAG("tfk8s_t_from_conf_poll5", schedule=None, start_date=START, catchup=False, max_active_runs=64,
         render_template_as_native_obj=True,
         params={"namespace": Param("default", type="string"), "spec": Param({}, type="object")},
         tags=["tfk8s-test"]) as from_conf_poll5:
    tf_job("train", spec="{{ params.spec }}", poll_interval=5) >> PythonOperator(
        task_id="evaluate", python_callable=_record)

with DAG("tfk8s_t_noop", schedule=None, start_date=START, catchup=False, max_active_runs=64,
         tags=["tfk8s-test"]) as noop:
    PythonOperator(task_id="noop", python_callable=_now)
