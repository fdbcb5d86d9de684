"""The reference model: a one-hidden-layer MLP for binary classification.

Why this shape: it is the smallest model that is still a real neural network (so PS
placement, gradients and checkpointing are exercised for several variables), it trains to
near the data's Bayes accuracy in a few hundred SGD steps on two CPU cores, and its four
variables have fixed names (``model/w1``, ``model/b1``, ``model/w2``, ``model/b2``) so a
TF1 name-based checkpoint, a TF2 object-based checkpoint and the SavedModel all carry the
same weights, and :mod:`.export` / :mod:`.evaluate` can read any of them.

Plain SGD (``v -= lr * grad``) instead of a Keras optimizer: ParameterServerStrategy with
Keras 3 optimizers is not supported, and SGD keeps the TF1 and TF2 paths numerically alike.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import tensorflow as tf

VAR_NAMES = ("w1", "b1", "w2", "b2")
DEFAULT_HIDDEN = 16


def init_values(features: int, hidden: int = DEFAULT_HIDDEN, seed: int = 0) -> dict[str, np.ndarray]:
    """Deterministic He-style initial weights (float32)."""
    rng = np.random.RandomState(seed)
    return {
        "w1": (rng.randn(features, hidden) * np.sqrt(2.0 / features)).astype(np.float32),
        "b1": np.zeros([hidden], np.float32),
        "w2": (rng.randn(hidden, 1) * np.sqrt(1.0 / hidden)).astype(np.float32),
        "b2": np.zeros([1], np.float32),
    }


def logits(x: tf.Tensor, w: Mapping[str, tf.Tensor]) -> tf.Tensor:
    """Logits of shape [batch] (works in TF1 graphs and TF2 functions)."""
    hidden = tf.nn.relu(tf.matmul(x, w["w1"]) + w["b1"])
    return tf.reshape(tf.matmul(hidden, w["w2"]) + w["b2"], [-1])


def loss(logit: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
    return tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logit))


def predict_numpy(weights: Mapping[str, np.ndarray], x: np.ndarray) -> np.ndarray:
    """Probabilities for ``x`` from plain weight arrays (no session, no graph)."""
    hidden = np.maximum(x @ weights["w1"] + weights["b1"], 0.0)
    z = (hidden @ weights["w2"] + weights["b2"]).reshape(-1)
    return 1.0 / (1.0 + np.exp(-z))


class Model(tf.Module):
    """TF2 holder of the four variables (object-based checkpoint keys ``model/<name>``)."""

    def __init__(self, features: int, hidden: int = DEFAULT_HIDDEN, seed: int = 0):
        super().__init__(name="model")
        init = init_values(features, hidden, seed)
        self.w1 = tf.Variable(init["w1"], name="w1")
        self.b1 = tf.Variable(init["b1"], name="b1")
        self.w2 = tf.Variable(init["w2"], name="w2")
        self.b2 = tf.Variable(init["b2"], name="b2")

    def weights(self) -> dict[str, tf.Variable]:
        return {n: getattr(self, n) for n in VAR_NAMES}
