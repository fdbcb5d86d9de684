"""One LIST of a job's pods, judged: the job's status and its TensorBoard's, as every watcher sees them.

Why one function: the job's shared watch (:mod:`tfk8s_airflow.k8s.watch`, behind the triggers) and
the sensor's non-deferrable poke read the same LIST the same way; neither keeps a judgement of its
own. What the watch adds (the recovery planner, a verdict recorded on the job's Service) acts on
this status; it never judges the pods again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tfk8s_airflow.job.builders.tensorboard import TensorBoardState, tensorboard_state
from tfk8s_airflow.job.run.judge import JobPolicy, JobStatus, evaluate

__all__ = ["judge_pods"]


def judge_pods(pods: Sequence[Mapping[str, Any]], policy: JobPolicy, now: float, watch_started: float,
               tensorboard_pod: str | None = None, recorded: Mapping[str, tuple[str, int]] | None = None
               ) -> tuple[JobStatus, TensorBoardState | None]:
    """The job's status by ``policy`` and its TensorBoard pod's state (never judged) from one LIST;
    ``recorded``: the job's own pods by UID (:func:`~tfk8s_airflow.job.run.judge.evaluate`)."""
    return evaluate(pods, policy, now, watch_started, recorded), tensorboard_state(pods, tensorboard_pod)
