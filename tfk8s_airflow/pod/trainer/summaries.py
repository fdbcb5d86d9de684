"""TensorBoard summaries of the reference trainer: the chief's scalars under ``<model dir>/train``.

Why only the chief (worker 0 without one): the global step is shared, so one writer gives one
curve; every worker writing would interleave their local views of the same steps. Why under the
model directory: it is the volume the job shares, so a TensorBoard pod of the job
(``tensorboard:`` in the spec, whose ``log_dir`` is the model volume by default) reads it
while training runs. A restarted chief opens a new event file in the same directory and goes on
from the restored step; TensorBoard shows one run, ``train``.

Scalars: ``loss`` and ``examples_per_sec`` (the replica's own rate), at the global step. Each write
is flushed, so TensorBoard sees it at its next reload.
"""

from __future__ import annotations

import os

import tensorflow as tf

from tfk8s_airflow.contract import SUMMARY_DIR

__all__ = ["summary_dir", "TF1Summaries", "TF2Summaries"]


def summary_dir(model_dir: str) -> str:
    return os.path.join(model_dir, SUMMARY_DIR)


def _values(values: dict[str, float | None]) -> dict[str, float]:
    return {tag: float(v) for tag, v in values.items() if v is not None and v == v}  # NaN: not written


class TF1Summaries:
    """``tf.compat.v1.summary.FileWriter``; create it inside the training graph (it needs graph mode)."""

    def __init__(self, model_dir: str) -> None:
        self._writer = tf.compat.v1.summary.FileWriter(summary_dir(model_dir))

    def scalars(self, step: int, **values: float | None) -> None:
        summary = tf.compat.v1.Summary(value=[tf.compat.v1.Summary.Value(tag=tag, simple_value=v)
                                              for tag, v in _values(values).items()])
        self._writer.add_summary(summary, int(step))
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()


class TF2Summaries:
    """``tf.summary.create_file_writer``, written eagerly on the chief (the coordinator)."""

    def __init__(self, model_dir: str) -> None:
        self._writer = tf.summary.create_file_writer(summary_dir(model_dir))

    def scalars(self, step: int, **values: float | None) -> None:
        with self._writer.as_default():
            for tag, v in _values(values).items():
                tf.summary.scalar(tag, v, step=int(step))
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()
