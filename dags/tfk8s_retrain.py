"""Retraining DAGs: the daily schedule (safe to backfill) and a manual, form-driven training.

Both build the same pipeline from the same spec and operators:

    wait for partition -> stage (HDFS -> GlusterFS, sharded) -> [train group] -> evaluate -> promote

* ``tfk8s_retrain_daily``: waits for ``/data/clicks/dt={{ ds }}/_SUCCESS`` on HDFS, copies the
  partition onto the GlusterFS cache, trains a PS/worker job on it, evaluates the model on
  the held-out file in an evaluation pod built from the same spec (never inside the Airflow
  worker: a SavedModel is a program) and promotes it to ``serving/`` only if it beats the
  last promoted one.
  Everything is keyed by the logical date (cache, model directory, version, job name), so
  backfills and clears are idempotent and concurrent runs share nothing.
* ``tfk8s_train_manual``: no schedule; the Params form (image, PS and worker counts, GPUs per
  worker, data path, steps, learning rate, a TensorBoard or not) is validated by JSON schema,
  so a bad value is refused in the UI (or by the REST API / CLI) before a run exists.

Paths: ``TFK8S_GLUSTER_MOUNT`` (default ``/mnt/tfk8s-gluster``) is where both the Airflow
worker and the nodes see the GlusterFS volume; the pods mount the same paths (hostPath).
``TFK8S_ROOT`` (default ``$TFK8S_GLUSTER_MOUNT/tfk8s``, a directory on the volume) holds
``cache/``, ``models/``, ``serving/`` and ``logs/``. ``TFK8S_POD_ENV`` (a JSON object) adds to
every pod's environment. ``TFK8S_TRAINING_IMAGE`` is the form's default image (unset:
``tfk8s/trainer:0.1``); on the devstack, ``devstack/env node`` exports the training image its
registry holds, and the replicas run on its real node (label ``type=local``, taint
``tfk8s.io/real-node``).
"""
from __future__ import annotations

import json
import os

import pendulum

# Named here so Airflow's DAG processor imports the provider once, in its parent, before it
# forks each parse (parsing_pre_import_modules): TFReplicaPodOperator subclasses it.
from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator  # noqa: F401
from airflow.sdk import DAG, Asset, Param

from tfk8s_airflow.assetnames import volume_uri
from tfk8s_airflow.operators.evaluation import TFEvaluateOperator
from tfk8s_airflow.operators.promotion import ModelPromoteOperator
from tfk8s_airflow.operators.staging import HdfsStageOperator
from tfk8s_airflow.sensors.hdfs import HdfsPartitionSensor
from tfk8s_airflow.taskgroup import tf_job

VOLUME = os.environ.get("TFK8S_GLUSTER_MOUNT", "/mnt/tfk8s-gluster")
# Everything of these DAGs (cache, models, serving, logs) lives under ROOT, on the volume.
ROOT = os.environ.get("TFK8S_ROOT") or f"{VOLUME}/tfk8s"
POD_ENV = json.loads(os.environ.get("TFK8S_POD_ENV") or "{}")
IMAGE = os.environ.get("TFK8S_TRAINING_IMAGE") or "tfk8s/trainer:0.1"
#: An event per staged partition (extra: partition, manifest, files, bytes, input_uri: the HDFS partition's
#: hdfs:// URI, uri: the staged copy's file:// URI) and per promoted model (extra: version, metric, value,
#: path, uri); dags/tfk8s_deploy.py is scheduled on the model. Their URIs name the directories on the volume
#: that hold every staged partition and every promoted version (docs/observability.md, "Lineage").
STAGED = Asset(name="tfk8s-clicks-staged", uri=volume_uri(f"{ROOT}/cache"))
MODEL = Asset(name="tfk8s-ctr-model", uri=volume_uri(f"{ROOT}/serving"))

COMMON_PARAMS = {
    "namespace": Param("default", type="string", pattern="^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
                       description="Kubernetes namespace of the job"),
    "node_type": Param("local", type="string", description="node label 'type' the replicas run on"),
    "image": Param(IMAGE, type="string", minLength=1, description="trainer image"),
    "ps": Param(1, type="integer", minimum=1, maximum=16, description="parameter servers"),
    "workers": Param(2, type="integer", minimum=1, maximum=64, description="workers"),
    "gpus_per_worker": Param(0, type="integer", minimum=0, maximum=8, description="nvidia.com/gpu per worker"),
    "steps": Param(300, type="integer", minimum=1, maximum=1_000_000, description="training steps"),
    "learning_rate": Param(0.1, type="number", exclusiveMinimum=0, maximum=10, description="SGD learning rate"),
    "threshold": Param(0.6, type="number", minimum=0, maximum=1, description="minimum held-out accuracy"),
    "tensorboard": Param(False, type="boolean",
                         description="start a TensorBoard for the job, serving the model directory's summaries "
                                     "(linked from the TF jobs view and the sensor when [tfk8s] tensorboard_url "
                                     "is set)"),
}


def training_spec(model_dir: str) -> dict:
    """The job spec, templated from params; the same for the schedule and the form."""
    return {
        "name": "ctr",
        "namespace": "{{ params.namespace }}",
        "image": "{{ params.image }}",
        "node_selector": {"type": "{{ params.node_type }}"},
        # The devstack's real node is tainted so only jobs meant for it land there.
        "tolerations": [{"key": "tfk8s.io/real-node", "operator": "Exists", "effect": "NoSchedule"}],
        "command": ["python", "-m", "tfk8s_airflow.pod.trainer"],
        "args": ["--mode", "tf1", "--steps", "{{ params.steps }}", "--batch-size", "64",
                 "--learning-rate", "{{ params.learning_rate }}", "--peer-timeout", "120"],
        "resources": {"cpu": "500m", "memory": "1Gi"},
        **({"env": POD_ENV} if POD_ENV else {}),
        "restart_policy": "OnFailure",
        "max_restarts": 3,
        "schedule_timeout": "2m",
        "startup_timeout": "5m",
        "active_deadline": "2h",
        "tensorboard": "{{ params.tensorboard }}",  # log_dir: the model volume (the chief writes train/ there)
        "volumes": [
            {"name": "data", "mount_path": f"{ROOT}/cache", "host_path": f"{ROOT}/cache", "read_only": True},
            {"name": "model", "mount_path": model_dir, "host_path": model_dir},
        ],
        "ps": {"replicas": "{{ params.ps }}"},
        "worker": {"replicas": "{{ params.workers }}",
                   "resources": {"cpu": "500m", "memory": "1Gi", "nvidia.com/gpu": "{{ params.gpus_per_worker }}"}},
    }


def pipeline(data_path: str, key: str, promote: bool) -> None:
    """Builds the tasks inside the current DAG. ``key`` names the run's cache/model dirs."""
    cache = f"{ROOT}/cache/{key}"
    model_dir = f"{ROOT}/models/{key}"
    wait = HdfsPartitionSensor(task_id="wait_for_partition", path=data_path, marker="_SUCCESS",
                               poke_interval=10, timeout=6 * 3600, deferrable=True)
    stage = HdfsStageOperator(task_id="stage", input_path=data_path, pattern="train-*.csv",
                              num_workers="{{ params.workers }}", cache_dir=cache, volume_path=VOLUME,
                              allowed_roots=[f"{ROOT}/cache"], outlets=[STAGED] if promote else [])
    heldout = HdfsStageOperator(task_id="stage_heldout", input_path=f"{data_path}/heldout.csv",
                                num_workers=1, cache_dir=cache, volume_path=VOLUME,
                                allowed_roots=[f"{ROOT}/cache"],
                                manifest_path=f"{cache}/_heldout_manifest.json")
    train = tf_job("train", spec=training_spec(model_dir), shards=stage.output, poll_interval=2,
                   archive_dir=f"{ROOT}/logs")
    # A pod of the job's kind (its node placement, volumes read-only) runs the evaluator, in the deployment's
    # [tfk8s] evaluation_image: never the form's image, whose owner would then write the accuracy.
    evaluate = TFEvaluateOperator(task_id="evaluate", spec=training_spec(model_dir), model_dir=model_dir,
                                  heldout=f"{cache}/heldout.csv", threshold="{{ params.threshold }}", env=POD_ENV)
    wait >> [stage, heldout]
    stage >> train
    [train, heldout] >> evaluate
    if promote:
        evaluate >> ModelPromoteOperator(task_id="promote", model_dir=model_dir,
                                         serving_root=f"{ROOT}/serving", metrics=evaluate.output,
                                         version="{{ ds }}", model_asset=MODEL)


with DAG(
    "tfk8s_retrain_daily",
    schedule="@daily",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=2,
    render_template_as_native_obj=True,
    params=COMMON_PARAMS,
    tags=["tfk8s", "retrain"],
    doc_md=__doc__,
) as retrain_daily:
    pipeline("/data/clicks/dt={{ ds }}", "dt={{ ds }}", promote=True)


with DAG(
    "tfk8s_train_manual",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    render_template_as_native_obj=True,
    params={**COMMON_PARAMS,
            "data_path": Param("/data/clicks/dt=2026-01-01", type="string", pattern="^/[^\\s]*$",
                               description="HDFS partition to train on (needs _SUCCESS)")},
    tags=["tfk8s", "manual"],
    doc_md=__doc__,
) as train_manual:
    pipeline("{{ params.data_path }}", "manual/{{ run_id | replace(':', '-') | replace('+', '-') }}",
             promote=False)
