"""Evaluate a trained model on held-out data; gate promotion on a threshold.

Why: a retraining DAG must not promote a model just because the job exited 0. This loads
what the job left in the model directory (the SavedModel if present, else the latest
checkpoint, so a chief that died after its last checkpoint is still judged), computes
accuracy on held-out files, and raises a :class:`PermanentError` subclass when the model
is missing or worse than the threshold: retrying an evaluation cannot improve a model.
It is plain Python + TensorFlow so a pod can call :func:`evaluate` directly;
``python -m tfk8s_airflow.pod.trainer.evaluate`` prints the result as JSON and exits 0 / 1
(permanent) like the trainer. ``TFEvaluateOperator`` runs it in an evaluation pod (the result
goes to the container's termination message, ``--termination-log``) or in a scrubbed child
process (``--out``), never inside the Airflow worker: a SavedModel is a program.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from tfk8s_airflow.contract import TERMINATION_LOG, TERMINATION_LOG_ENV
from tfk8s_airflow.exceptions import DataError, MetricBelowThresholdError, ModelMissingError
from tfk8s_airflow.pod import runtime
from tfk8s_airflow.pod.trainer.dataset import read_csv
from tfk8s_airflow.pod.trainer.inputs import split_files
from tfk8s_airflow.pod.trainer.state import write_json_atomic

log = logging.getLogger("tfk8s_airflow.pod.trainer.evaluate")


def _load_heldout(files: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    if not files:
        raise DataError("no held-out files given")
    missing = [f for f in files if not os.path.exists(f)]
    if missing:
        raise DataError(f"held-out file(s) missing: {', '.join(missing)}")
    try:
        xs, ys = read_csv(files)
    except (OSError, ValueError) as exc:
        raise DataError(f"cannot read held-out data: {exc}") from None
    if not ys:
        raise DataError(f"held-out files have no rows: {', '.join(files)}")
    return np.asarray(xs, np.float32), np.asarray(ys, np.float32)


def _probabilities(model_dir: str, x: np.ndarray, source: str) -> tuple[np.ndarray, int, str]:
    import tensorflow as tf  # noqa: PLC0415 - heavy; imported when actually evaluating

    from tfk8s_airflow.pod.trainer import export  # noqa: PLC0415 - imports TensorFlow
    from tfk8s_airflow.pod.trainer.model import predict_numpy  # noqa: PLC0415

    saved = os.path.join(model_dir, export.SAVED_MODEL_DIR)
    if source in ("auto", "saved_model") and os.path.exists(os.path.join(saved, "saved_model.pb")):
        loaded = tf.saved_model.load(saved)
        probs = loaded.signatures["serving_default"](x=tf.constant(x))["probability"].numpy()
        return probs, int(loaded.global_step.numpy()), "saved_model"
    if source == "saved_model":
        raise ModelMissingError(f"no SavedModel at {saved}")
    ckpt = export.latest_checkpoint(model_dir) if os.path.isdir(model_dir) else None
    if not ckpt:
        raise ModelMissingError(
            f"no trained model in {model_dir}: neither {export.SAVED_MODEL_DIR}/ nor a checkpoint "
            "(did the training job write to this model directory?)")
    weights, step = export.weights_from_checkpoint(ckpt)
    return predict_numpy(weights, x), step, f"checkpoint:{os.path.basename(ckpt)}"


def evaluate(model_dir: str, heldout_files: Sequence[str], threshold: float | None = None,
             source: str = "auto") -> dict:
    """``{"accuracy", "examples", "global_step", "source", "positive_rate"}``.

    ``source``: ``auto`` (SavedModel, else latest checkpoint), ``saved_model`` or
    ``checkpoint``. Raises ModelMissingError, DataError, or MetricBelowThresholdError when
    ``threshold`` is given and accuracy is below it.
    """
    x, y = _load_heldout(list(heldout_files))
    probs, step, used = _probabilities(model_dir, x, source)
    predicted = (probs > 0.5).astype(np.float32)
    result: dict[str, Any] = {
        "accuracy": float(np.mean(predicted == y)),
        "examples": int(len(y)),
        "global_step": int(step),
        "source": used,
        "positive_rate": float(np.mean(y)),
    }
    log.info("evaluated %s: %s", model_dir, result)
    if threshold is not None and result["accuracy"] < threshold:
        raise MetricBelowThresholdError("accuracy", result["accuracy"], threshold,
                                        f"{used} at step {step}, {len(y)} examples")
    return result


def write_termination_message(text: str) -> None:
    """Write ``text`` in place (the kubelet's file is a mount point: no temporary file and rename),
    after the model ran, so nothing the model wrote there earlier survives."""
    path = os.environ.get(TERMINATION_LOG_ENV) or TERMINATION_LOG
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tfk8s_airflow.pod.trainer.evaluate",
                                description="Accuracy of a trained model on held-out CSV files.")
    p.add_argument("--model-dir", default=os.environ.get(runtime.MODEL_DIR_ENV))
    p.add_argument("--heldout", action="append", required=True, help="file(s), comma-separated or repeated")
    p.add_argument("--threshold", type=float, default=None, help="fail (exit 1) below this accuracy")
    p.add_argument("--source", choices=("auto", "saved_model", "checkpoint"), default="auto")
    p.add_argument("--out", default=None, help="also write the result JSON here")
    p.add_argument("--termination-log", action="store_true",
                   help=f"also write the result JSON as the container's termination message (${TERMINATION_LOG_ENV}, "
                        f"else {TERMINATION_LOG})")
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")

    def run() -> None:
        if not a.model_dir:
            raise ModelMissingError(f"--model-dir not given and {runtime.MODEL_DIR_ENV} not set")
        result = evaluate(a.model_dir, split_files(a.heldout), a.threshold, a.source)
        if a.out:
            write_json_atomic(a.out, result)
        if a.termination_log:
            write_termination_message(json.dumps(result, separators=(",", ":")))
        print(json.dumps(result), flush=True)

    return runtime.run_main(run)


if __name__ == "__main__":
    sys.exit(main())
