"""Scenario DAGs whose replicas really run: TensorFlow pods on the devstack's real node.

The pods select the real node (its label plus the toleration of its taint) and run the
training image (``TFK8S_TRAINING_IMAGE``: TensorFlow and the package's pod side, built from
deploy/training-image.Dockerfile), each replica's command with its exact TF_CONFIG. Host
paths come from ``params`` so a test gives each run its own data and model directories;
inside the pods they are always mounted at ``DATA`` and ``MODEL`` (hostPath volumes).
``evaluate`` runs the evaluation CLI on the model directory and held-out data and pushes
the result to XCom.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pendulum
from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import DAG, Param

from tfk8s_airflow.taskgroup import tf_job

START = pendulum.datetime(2026, 1, 1, tz="UTC")
DATA, MODEL, PROGRAMS = "/mnt/tfk8s-realpod/data", "/mnt/tfk8s-realpod/model", "/opt/tfk8s-programs"
#: The devstack's real node (devstack/components/node): its label, the toleration of its taint, and
#: the training image its registry holds (``TFK8S_TRAINING_IMAGE``, exported by ``devstack/env node``
#: and by the tests' ``realnode`` fixture before they run a DAG).
REAL_NODE = {"tfk8s.io/real-node": "true"}
TOLERATE_NODE = [{"key": "tfk8s.io/real-node", "operator": "Exists", "effect": "NoSchedule"}]
IMAGE = os.environ.get("TFK8S_TRAINING_IMAGE") or "tfk8s/trainer:0.1"
GOOD = 0.8  # the synthetic data's Bayes accuracy is ~0.91, chance 0.5


def evaluate_model(params: dict, **_context) -> dict:
    """Evaluate what the job left in the model directory (a subprocess: TensorFlow stays
    out of the Airflow worker); fails below the threshold."""
    cmd = [sys.executable, "-m", "tfk8s_airflow.pod.trainer.evaluate", "--model-dir", params["model_dir"],
           "--heldout", f"{params['data_dir']}/heldout.csv", "--threshold", str(GOOD)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if res.returncode != 0:
        raise RuntimeError(f"evaluation failed (exit {res.returncode}): {res.stdout[-2000:]}{res.stderr[-3000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def tensorboard_scalars(ti, params: dict, **_context) -> dict:
    """What the job's TensorBoard serves, asked over HTTP at the URL the sensor's summary names, while
    its pod still exists (this task runs after the sensor, before teardown): the page, the scalar tags
    of every run, and the loss curve of ``train``. TensorBoard reloads every 5 s, so it is asked (for
    at most 3 minutes) until its curve reaches the chief's last summary step, which the chief also
    recorded in ``replicas/worker-0.json``."""
    import time

    import requests

    url = (ti.xcom_pull(task_ids="train.wait", key="summary") or {}).get("tensorboard_url")
    if not url:
        raise RuntimeError("the sensor's summary names no TensorBoard URL")
    runs = json.loads((Path(params["model_dir"]) / "replicas" / "worker-0.json").read_text())["runs"]
    last_step = runs[-1]["last_step"]
    deadline, tags, loss = time.monotonic() + 180, {}, []
    while time.monotonic() < deadline:
        try:
            tags = requests.get(f"{url}data/plugin/scalars/tags", timeout=10).json()
            if "loss" in tags.get("train", {}):
                loss = requests.get(f"{url}data/plugin/scalars/scalars", params={"run": "train", "tag": "loss"},
                                    timeout=10).json()
        except (requests.RequestException, ValueError):
            pass
        if loss and loss[-1][1] == last_step:
            break
        time.sleep(2)
    return {"url": url, "page": requests.get(url, timeout=10).status_code, "tags": tags, "loss": loss,
            "last_step": last_step}


def _params(**extra) -> dict:
    return {"namespace": Param("default", type="string"), "data_dir": Param("/nonexistent", type="string"),
            "model_dir": Param("/nonexistent", type="string"), "shards": Param({}, type="object"),
            "steps": Param(300, type="integer"), "step_delay": Param(0.0, type="number"),
            "checkpoint_every": Param(100, type="integer"),
            # recovery (docs/recovery.md): the spec's budgets and timeouts
            "group_restarts": Param(0, type="integer"), "infra_restarts": Param(3, type="integer"),
            "restart_backoff": Param("2s", type="string"),
            "progress_timeout": Param(None, type=["null", "string"]),
            "straggler_timeout": Param(None, type=["null", "string"]), **extra}


def _volumes() -> list[dict]:
    return [{"name": "data", "mount_path": DATA, "host_path": "{{ params.data_dir }}", "read_only": True},
            {"name": "model", "mount_path": MODEL, "host_path": "{{ params.model_dir }}"}]


RECOVERY_KEYS = ("group_restarts", "infra_restarts", "restart_backoff", "progress_timeout", "straggler_timeout")


def _recovery() -> dict:
    return {key: f"{{{{ params.{key} }}}}" for key in RECOVERY_KEYS}


# Holds every replica's program until the test creates ``<model dir>/<name>`` (sh's $0 is the program).
HOLD = 'until [ -e "{model}/{name}" ]; do sleep 0.5; done; exec "$0" "$@"'


def trainer_dag(dag_id: str, mode: str, roles: dict, evaluate: bool = True, extra_args: tuple = (),
                tensorboard: bool = False, logs: bool = False, hold_until: str | None = None, **params) -> DAG:
    program = ["python", "-m", "tfk8s_airflow.pod.trainer"]
    spec = {
        "name": f"rp-{mode}", "namespace": "{{ params.namespace }}", "image": IMAGE,
        "node_selector": REAL_NODE, "tolerations": TOLERATE_NODE,
        "command": ["sh", "-c", HOLD.format(model=MODEL, name=hold_until), *program] if hold_until else program,
        "args": ["--mode", mode, "--model-dir", MODEL, "--steps={{ params.steps }}",
                 "--step-delay={{ params.step_delay }}", "--checkpoint-every={{ params.checkpoint_every }}",
                 "--log-every", "10", "--heldout", f"{DATA}/heldout.csv", "--peer-timeout", "90", *extra_args],
        "env": {"TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONUNBUFFERED": "1"},
        "volumes": _volumes(), "max_restarts": 2, **_recovery(), **roles,
    }
    if tensorboard:
        spec["tensorboard"] = {"enabled": True}  # log_dir: the model volume, where the chief writes train/
    if logs:  # the job's log directory: the replica tasks stream each replica's whole log there
        spec["volumes"] = [*spec["volumes"],
                           {"name": "logs", "mount_path": "/logs", "host_path": "{{ params.logs_dir }}"}]
    with DAG(dag_id, schedule=None, start_date=START, catchup=False, render_template_as_native_obj=True,
             params=_params(**params), tags=["tfk8s-test", "realpods"]) as dag:
        train = tf_job("train", spec=spec, shards="{{ params.shards }}", poll_interval=1,
                       sensor_timeout=600)
        if evaluate:
            train >> PythonOperator(task_id="evaluate", python_callable=evaluate_model)
        if tensorboard:  # after the sensor, before teardown deletes the TensorBoard with the job
            dag.get_task("train.wait") >> PythonOperator(task_id="tensorboard", python_callable=tensorboard_scalars) \
                >> dag.get_task("train.teardown")
    return dag


# TF1 between-graph async: 1 PS + 2 tracked workers (worker 0 is the chief).
tf1 = trainer_dag("tfk8s_rp_tf1", "tf1", {"ps": 1, "worker": {"replicas": 2}})
# TF2 ParameterServerStrategy: the chief decides; PS and workers are untracked servers.
tf2 = trainer_dag("tfk8s_rp_tf2", "tf2", {"chief": 1, "ps": 1, "worker": {"replicas": 2, "tracked": False}})
# TF1 with a TensorBoard pod: a real tensorboard process on the real node serves the chief's summaries.
# The replicas start training once the test saw the TensorBoard pod Ready (it creates tensorboard.ready):
# a job shorter than TensorBoard's start would end before the sensor could link it.
tf1_tensorboard = trainer_dag("tfk8s_rp_tf1_tensorboard", "tf1", {"ps": 1, "worker": {"replicas": 2}},
                              evaluate=False, tensorboard=True, hold_until="tensorboard.ready")

# TF1 logging every step into a log directory (a `logs` volume): every replica's whole log is streamed there.
tf1_logs = trainer_dag("tfk8s_rp_tf1_logs", "tf1", {"ps": 1, "worker": {"replicas": 2}}, evaluate=False,
                       extra_args=("--log-every", "1"), logs=True, logs_dir=Param("/nonexistent", type="string"))

# TF1 with one worker whose program stops making progress after a step (--stall-after).
tf1_stall = trainer_dag("tfk8s_rp_tf1_stall", "tf1", {"ps": 1, "worker": {"replicas": 1}}, evaluate=False,
                        extra_args=("--stall-after={{ params.stall_after }}",),
                        stall_after=Param(50, type="integer"))

# A program of 2017 (flags, between-graph replication, no device filters) whose worker 1 comes
# to its session only after the chief finished: it hangs in session creation, waiting for the
# chief's server, as such programs did. The success policy comes from the params.
with DAG("tfk8s_rp_flags_straggler", schedule=None, start_date=START, catchup=False,
         render_template_as_native_obj=True,
         params=_params(programs_dir=Param("/nonexistent", type="string"),
                        success_policy=Param("default", type="string")),
         tags=["tfk8s-test", "realpods"]) as flags_straggler:
    tf_job("train", spec={
        "name": "rp-flags", "namespace": "{{ params.namespace }}", "image": IMAGE,
        "node_selector": REAL_NODE, "tolerations": TOLERATE_NODE, "tf_wiring": "flags",
        "success_policy": "{{ params.success_policy }}",
        "command": ["python3", f"{PROGRAMS}/flags_2017.py"],
        "args": ["--train_steps={{ params.steps }}", f"--late_until={MODEL}/chief.done", f"--model_dir={MODEL}"],
        "env": {"TF_CPP_MIN_LOG_LEVEL": "0", "PYTHONUNBUFFERED": "1"},
        "volumes": [{"name": "programs", "mount_path": PROGRAMS, "host_path": "{{ params.programs_dir }}",
                     "read_only": True},
                    {"name": "model", "mount_path": MODEL, "host_path": "{{ params.model_dir }}"}],
        "ps": 1, "worker": 2, **_recovery(),
    }, poll_interval=1, sensor_timeout=600)

# A program written for Kubeflow's TFJob (reads only TF_CONFIG), run unchanged from a
# hostPath volume; it writes its result JSON to the model volume.
with DAG("tfk8s_rp_tfjob_program", schedule=None, start_date=START, catchup=False,
         render_template_as_native_obj=True,
         params=_params(programs_dir=Param("/nonexistent", type="string")),
         tags=["tfk8s-test", "realpods"]) as tfjob_program:
    tf_job("train", spec={
        "name": "rp-tfjob", "namespace": "{{ params.namespace }}", "image": IMAGE,
        "node_selector": REAL_NODE, "tolerations": TOLERATE_NODE,
        "command": ["python3", f"{PROGRAMS}/tfjob_style.py"],
        "args": ["--steps={{ params.steps }}", "--out", MODEL],
        "env": {"TF_CPP_MIN_LOG_LEVEL": "2"},
        "volumes": [{"name": "programs", "mount_path": PROGRAMS, "host_path": "{{ params.programs_dir }}",
                     "read_only": True},
                    {"name": "model", "mount_path": MODEL, "host_path": "{{ params.model_dir }}"}],
        "ps": 1, "worker": 2,
    }, poll_interval=1, sensor_timeout=600)

# The job's network (tests/realnode/test_job_network.py): a PS and a worker that serve their TF port
# (tests/tf/programs/serve_and_reach.py, no TensorFlow), the worker reaching the PS by its name, and a
# TensorBoard; the worker ends once the test, done probing from outside the job, creates network.done.
with DAG("tfk8s_rp_network", schedule=None, start_date=START, catchup=False, render_template_as_native_obj=True,
         params=_params(programs_dir=Param("/nonexistent", type="string")),
         tags=["tfk8s-test", "realpods"]) as network:
    tf_job("train", spec={
        "name": "rp-net", "namespace": "{{ params.namespace }}", "image": IMAGE,
        "node_selector": REAL_NODE, "tolerations": TOLERATE_NODE,
        "command": ["python3", f"{PROGRAMS}/serve_and_reach.py"], "args": ["--out", MODEL],
        "env": {"PYTHONUNBUFFERED": "1"},
        "volumes": [{"name": "programs", "mount_path": PROGRAMS, "host_path": "{{ params.programs_dir }}",
                     "read_only": True},
                    {"name": "model", "mount_path": MODEL, "host_path": "{{ params.model_dir }}"}],
        "tensorboard": {"enabled": True},
        "ps": 1, "worker": 1,
    }, poll_interval=1, sensor_timeout=600)
