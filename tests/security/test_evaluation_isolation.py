"""A malicious SavedModel evaluated by the retraining pipeline's evaluation task.

The model is a real TensorFlow SavedModel (tiny: one ``serving_default`` signature) whose
graph reads ``/proc/self/environ``, prints it to stderr, prints a forged result with
accuracy 1.0 to stdout, writes what it read to a file outside its model directory (in
subprocess mode), and answers 1.0 for every example. The Airflow worker (this test process,
running the tasks with ``dag.test()``) holds a connection password in its environment.
Evaluated in a scrubbed child process and in an evaluation pod on the devstack's real node
(the training image, real TensorFlow), the password must appear nowhere: not in the result
(XCom), not in the task log, not in what the model wrote or printed. The result must be the
evaluator's, not the forged one, and a threshold the model does not reach must fail the task.

In pod mode the evaluation pod mounts the volume read-only (on a real node a write there
fails, and so would the model), so that model only prints what it read; the task log, which
holds the pod's output, is where the check looks.
"""
from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from tests.dagrun import states, xcom
from tfk8s_airflow.pod.trainer.dataset import generate

pytestmark = [pytest.mark.tf, pytest.mark.gluster, pytest.mark.airflow, pytest.mark.timeout(900)]
REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "dags"))


#: Builds the model, in a process of its own: TensorFlow stays out of the test process (the worker).
BUILD_MODEL = r"""
import sys
import tensorflow as tf

path, leak = sys.argv[1], sys.argv[2]  # leak "-": print only (the volume is read-only in pod mode)


class Model(tf.Module):
    def __init__(self):
        super().__init__()
        self.global_step = tf.Variable(7, dtype=tf.int64, trainable=False)

    @tf.function(input_signature=[tf.TensorSpec([None, 8], tf.float32, name="x")])
    def serve(self, x):
        environ = tf.io.read_file("/proc/self/environ")
        tf.print("the evaluator's environment:", environ, output_stream=sys.stderr)
        tf.print('{"accuracy": 1.0, "examples": 1, "global_step": 1, "source": "saved_model", '
                 '"positive_rate": 1.0}', output_stream=sys.stdout)
        if leak != "-":
            tf.io.write_file(leak, environ)
        return {"probability": tf.ones(tf.shape(x)[:1])}


model = Model()
tf.saved_model.save(model, path, signatures={"serving_default": model.serve})
"""


def _malicious_saved_model(path: Path, leak: Path | str) -> None:
    res = subprocess.run([sys.executable, "-c", BUILD_MODEL, str(path / "saved_model"), str(leak)],
                         capture_output=True, text=True, timeout=300, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert res.returncode == 0, res.stderr[-3000:]


def _evil(gluster_dir, monkeypatch, *, writes: bool) -> dict:
    data = generate(str(gluster_dir / "cache"), files=1, rows=50, seed=3, heldout_rows=400)
    assert data["heldout_file"] == str(gluster_dir / "cache" / "heldout.csv")
    (gluster_dir / "leaks").mkdir()
    _malicious_saved_model(gluster_dir / "models" / "evil", gluster_dir / "leaks" / "environ" if writes else "-")
    secret = f"pw-{secrets.token_hex(12)}"  # the worker's connection password
    monkeypatch.setenv("AIRFLOW_CONN_WAREHOUSE", f"postgresql://etl:{secret}@warehouse:5432/dwh")
    labels = [line.split(",")[0] for line in (gluster_dir / "cache" / "heldout.csv").read_text().splitlines()[1:]]
    return {"secret": secret, "root": gluster_dir, "positive_rate": labels.count("1") / len(labels),
            "writes": writes}


@pytest.fixture
def evil(gluster_dir, monkeypatch):
    """The model that also writes what it read outside its directory (subprocess mode)."""
    return _evil(gluster_dir, monkeypatch, writes=True)


@pytest.fixture
def evil_printing(gluster_dir, monkeypatch):
    """The model that prints what it read only (pod mode: the volume is read-only in the pod)."""
    return _evil(gluster_dir, monkeypatch, writes=False)


def _check(dr, evil, captured: str) -> dict:
    st = states(dr)
    assert st[("evaluate", -1)] == "success" and st[("gate", -1)] == "failed", st
    result = xcom(dr, "evaluate")
    assert set(result) == {"accuracy", "examples", "global_step", "source", "positive_rate"}, result
    # The evaluator's own numbers: every example answered 1.0, so accuracy is the positive rate.
    assert result["examples"] == 400 and result["global_step"] == 7 and result["source"] == "saved_model"
    assert result["accuracy"] == pytest.approx(evil["positive_rate"]) != 1.0
    assert xcom(dr, "gate") is None
    if evil["writes"]:
        leaked = (evil["root"] / "leaks" / "environ").read_bytes()
        assert b"PATH=" in leaked  # the model did run and read its environment...
        assert evil["secret"].encode() not in leaked  # ...which held none of the worker's secrets
    else:
        said = captured.split("the evaluator's environment:", 1)
        assert len(said) == 2 and "PATH=" in said[1], captured[-3000:]  # it ran and printed what it read
    assert evil["secret"] not in captured and evil["secret"] not in str(result)
    assert "below the threshold 0.9" in captured
    return result


def test_subprocess_mode_gives_the_model_none_of_the_workers_environment(evil, airflow_db, capsys):
    import tfk8s_security_scenarios

    dr = tfk8s_security_scenarios.eval_subprocess.test(run_conf={"root": str(evil["root"])})
    out, err = capsys.readouterr()
    _check(dr, evil, out + err)
    assert "the evaluator's environment" in out + err  # the child's output is in the task log, scrubbed


def test_pod_mode_runs_the_model_in_a_pod_of_the_job(evil_printing, airflow_db, realnode, k8s_namespace, capsys,
                                                     monkeypatch):
    import tfk8s_security_scenarios

    evil = evil_printing
    realnode.grant_pull(k8s_namespace)
    monkeypatch.setenv("AIRFLOW__TFK8S__EVALUATION_IMAGE", realnode.image)  # the deployment's evaluator image
    dr = tfk8s_security_scenarios.eval_pod.test(run_conf={"root": str(evil["root"]), "namespace": k8s_namespace})
    out, err = capsys.readouterr()
    _check(dr, evil, out + err)
    assert "in pod " + k8s_namespace in out + err and "HOSTNAME=evaluation" in out + err
    assert os.environ["AIRFLOW_CONN_WAREHOUSE"].endswith("/dwh")
    core = realnode.cluster.core_v1
    assert core.list_namespaced_pod(k8s_namespace, label_selector="tfk8s.io/evaluation").items == []
