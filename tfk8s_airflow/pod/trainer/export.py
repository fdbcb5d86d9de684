"""Move weights between checkpoints, plain arrays and a SavedModel.

Why: TF1 between-graph training keeps its variables on the parameter servers and saves
name-based checkpoints; TF2 ParameterServerStrategy saves object-based ones. Rather than
exporting from inside either distributed runtime (fragile: the PS may be gone), the chief
reads the weights back as arrays and writes one self-contained SavedModel that needs no
cluster to serve. The same reader lets :mod:`.evaluate` fall back to the latest checkpoint
when no SavedModel was written (e.g. the chief died after its last checkpoint).

The SavedModel lives in ``<model_dir>/saved_model`` and is replaced atomically (written
beside it, then renamed), so a reader never loads a half-written model.
"""

from __future__ import annotations

import os
import shutil

import numpy as np
import tensorflow as tf

from tfk8s_airflow.exceptions import ModelMissingError
from tfk8s_airflow.pod.trainer import model as mdl

SAVED_MODEL_DIR = "saved_model"
_STEP_KEYS = ("global_step", "step/.ATTRIBUTES/VARIABLE_VALUE")


def latest_checkpoint(model_dir: str) -> str | None:
    return tf.train.latest_checkpoint(model_dir)


def weights_from_checkpoint(path: str) -> tuple[dict[str, np.ndarray], int]:
    """Weights and global step from a TF1 (``model/w1``) or TF2 (``model/w1/.ATTRIBUTES/...``)
    checkpoint prefix."""
    reader = tf.train.load_checkpoint(path)
    keys = set(reader.get_variable_to_shape_map())
    weights: dict[str, np.ndarray] = {}
    for name in mdl.VAR_NAMES:
        for key in (f"model/{name}", f"model/{name}/.ATTRIBUTES/VARIABLE_VALUE"):
            if key in keys:
                weights[name] = reader.get_tensor(key)
                break
        else:
            raise ModelMissingError(f"checkpoint {path} has no variable model/{name} "
                                    f"(not written by this trainer?)")
    step = next((int(reader.get_tensor(k)) for k in _STEP_KEYS if k in keys), 0)
    return weights, step


class _Exported(tf.Module):
    def __init__(self, weights: dict[str, np.ndarray], step: int):
        super().__init__(name="model")
        self.w = {n: tf.Variable(weights[n], name=n, trainable=False) for n in mdl.VAR_NAMES}
        self.global_step = tf.Variable(step, dtype=tf.int64, trainable=False, name="global_step")
        features = int(weights["w1"].shape[0])

        @tf.function(input_signature=[tf.TensorSpec([None, features], tf.float32, name="x")])
        def serve(x: tf.Tensor) -> dict[str, tf.Tensor]:
            logit = mdl.logits(x, self.w)
            return {"logit": logit, "probability": tf.sigmoid(logit)}

        self.serve = serve


def export_saved_model(weights: dict[str, np.ndarray], step: int, model_dir: str) -> str:
    """Write ``<model_dir>/saved_model`` (signature ``serving_default``: x -> probability)."""
    final = os.path.join(model_dir, SAVED_MODEL_DIR)
    tmp = f"{final}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    module = _Exported(weights, step)
    tf.saved_model.save(module, tmp, signatures={"serving_default": module.serve})
    old = f"{final}.old-{os.getpid()}"
    if os.path.exists(final):
        os.replace(final, old)
    os.replace(tmp, final)
    shutil.rmtree(old, ignore_errors=True)
    return final


def export_from_checkpoint(model_dir: str) -> str:
    ckpt = latest_checkpoint(model_dir)
    if not ckpt:
        raise ModelMissingError(f"no checkpoint in {model_dir} to export")
    weights, step = weights_from_checkpoint(ckpt)
    return export_saved_model(weights, step, model_dir)
