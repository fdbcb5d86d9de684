"""Evaluation of a trained model as an Airflow task, never inside the Airflow worker.

Why: a SavedModel is a program. Loaded in the worker it runs with the worker's environment
(connection passwords), descriptors and files, and whatever it prints the worker would take
for the result. So the evaluator (``python -m tfk8s_airflow.pod.trainer.evaluate``) runs elsewhere
and the worker only takes its small result, validated
(:func:`tfk8s_airflow.job.builders.evaluation.read_result`), and applies the threshold itself:

* ``mode="pod"`` (given a ``spec``): an evaluation pod of the job's kind on Kubernetes, with
  the deployment's evaluation image (``[tfk8s] evaluation_image``), the job's resources, node
  placement and volumes (read-only), reporting through its termination message
  (:mod:`tfk8s_airflow.job.builders.evaluation`, :mod:`tfk8s_airflow.k8s.evalrun`). The spec and the
  pod pass the deployment's policy as setup's do (:func:`tfk8s_airflow.job.builders.admission.admit_pod`).
  The isolation is the pod's: nothing of the worker is in it.
* ``mode="subprocess"``: a child process with a scrubbed environment, a fresh working
  directory and no inherited descriptors (:mod:`tfk8s_airflow.isolation`), writing its result
  to a file there. It keeps the worker's secrets out of the model's reach through the
  environment, not through the file system: for trusted models, or where no cluster runs it.

A missing model, a metric below the threshold or a result that is not one is a permanent
failure; a timeout, an evicted pod or a retryable exit code (>= 128) is left to retries.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from tfk8s_airflow.contract import is_retryable_exit
from tfk8s_airflow.deployment import deployment_policy
from tfk8s_airflow.exceptions import DataError, MetricBelowThresholdError, SpecError
from tfk8s_airflow.isolation import run_isolated
from tfk8s_airflow.job.builders.admission import admit_pod
from tfk8s_airflow.job.builders.evaluation import (
    EVALUATOR,
    evaluation_names,
    evaluation_pod,
    evaluation_role,
    evaluator_args,
    printable,
    read_result,
)
from tfk8s_airflow.job.run.resolve import as_spec_input, resolve_spec
from tfk8s_airflow.k8s.client import JobClient
from tfk8s_airflow.k8s.evalrun import run_pod
from tfk8s_airflow.operators.base import fail_permanently

MODES = ("pod", "subprocess")


class TFEvaluateOperator(BaseOperator):
    """Accuracy of the trained model on held-out files; pushes the validated result dict.

    :param model_dir: the job's model directory (templated), as the evaluator sees it (in pod
        mode: the path inside the pod, i.e. under one of the spec's mount paths).
    :param heldout: held-out CSV file(s) (templated), seen the same way.
    :param threshold: fail below this accuracy (no promotion of a bad model).
    :param spec: the job's spec (as for ``tf_job``; templated): the evaluation pod is built from it.
    :param mode: ``"pod"`` (the default with a spec) or ``"subprocess"`` (the default without).
    :param source: ``auto`` (the SavedModel, else the latest checkpoint), ``saved_model`` or
        ``checkpoint`` (the weights only, evaluated by the evaluator's own code: no graph of the
        job's runs).
    :param env: extra environment of the evaluation pod or child process (templated).
    :param python: subprocess mode: an interpreter with TensorFlow (default: this one).
    :param timeout: seconds the evaluation may take (the pod's ``activeDeadlineSeconds``).
    :param use_job_image: pod mode: run the evaluator in the job's own image (the spec's role image)
        instead of the deployment's ``evaluation_image``. Not templated, so no form value sets it: it
        trusts whoever may set the spec's image (through ``params``, anyone who may trigger the DAG)
        with the accuracy the gate reads (docs/security.md).
    """

    template_fields: Sequence[str] = ("model_dir", "heldout", "threshold", "spec", "env")
    template_ext: Sequence[str] = ()

    def __init__(self, *, model_dir: str, heldout: str | list[str], threshold: float | None = None,
                 spec: Any = None, mode: str | None = None, source: str = "auto",
                 env: Mapping[str, str] | None = None, python: str | None = None, timeout: float = 600,
                 kubernetes_conn_id: str = "kubernetes_default", poll_interval: float = 2.0,
                 use_job_image: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        mode = mode or ("pod" if spec is not None else "subprocess")
        if mode not in MODES:
            raise SpecError(f"must be one of {', '.join(MODES)}, got {mode!r}", field="mode")
        if mode == "pod" and spec is None:
            raise SpecError("the pod mode builds the evaluation pod from the job's spec: give spec=", field="spec")
        self.model_dir = model_dir
        self.heldout = heldout
        self.threshold = threshold
        self.spec = as_spec_input(spec)
        self.mode = mode
        self.source = source
        self.env = env or {}
        self.python = python or sys.executable
        self.timeout = timeout
        self.kubernetes_conn_id = kubernetes_conn_id
        self.poll_interval = poll_interval
        if not isinstance(use_job_image, bool):
            raise SpecError(f"must be True or False, got {use_job_image!r}", field="use_job_image")
        self.use_job_image = use_job_image

    def _threshold(self) -> float | None:
        return None if self.threshold in (None, "") else float(self.threshold)

    def execute(self, context: Any) -> dict[str, Any]:
        files = [self.heldout] if isinstance(self.heldout, str) else [str(f) for f in self.heldout]
        threshold = self._threshold()
        with fail_permanently():
            if self.mode == "pod":
                exit_code, reason, message = self._in_pod(context, files, threshold)
            else:
                exit_code, reason, message = self._in_child(evaluator_args(str(self.model_dir), files, threshold,
                                                                           self.source))
            if exit_code != 0:
                self._failed(exit_code, reason)
            result = read_result(message)
            if threshold is not None and result["accuracy"] < threshold:  # the worker's own gate
                raise MetricBelowThresholdError("accuracy", result["accuracy"], threshold,
                                                f"{result['source']}, {result['examples']} examples")
        self.log.info("accuracy %.4f on %d examples (global step %s, %s)", result["accuracy"], result["examples"],
                      result["global_step"], result["source"])
        return result

    def _failed(self, exit_code: int | None, reason: str) -> None:
        text = f"evaluation of {self.model_dir} failed: {reason}"
        if exit_code is None or is_retryable_exit(exit_code):
            raise AirflowException(text)  # an eviction, a deadline, a signal: a retry may pass
        raise AirflowFailException(text)

    def _in_pod(self, context: Any, files: list[str], threshold: float | None) -> tuple[int | None, str, str]:
        dag = context["dag"]
        base_dir = os.path.dirname(dag.fileloc) if getattr(dag, "fileloc", None) else None
        policy = deployment_policy()
        spec = resolve_spec(self.spec, base_dir=base_dir, policy=policy)
        ti = context.get("ti")
        task = self.task_id if ti is None or getattr(ti, "map_index", -1) in (None, -1) \
            else f"{self.task_id}-{ti.map_index}"
        names = evaluation_names(spec, dag.dag_id, context["run_id"], task)
        role_image = spec.roles[evaluation_role(spec)].image if self.use_job_image else None
        pod = admit_pod(evaluation_pod(spec, names, model_dir=str(self.model_dir), heldout=files,
                                       threshold=threshold, source=self.source, timeout=int(self.timeout),
                                       env=self.env, policy=policy, image=role_image), policy,
                        what="evaluation pod")
        self.log.info("evaluating %s in pod %s/%s (image %s)", self.model_dir, names.namespace, names.job,
                      pod["spec"]["containers"][0]["image"])
        client = JobClient.from_conn(self.kubernetes_conn_id, pool_size=2)
        try:
            # The pod's own deadline ends it; the wait adds time for scheduling and the image.
            ending = run_pod(client, pod, timeout=self.timeout + 120, poll_interval=self.poll_interval,
                             logger=self.log)
        except TimeoutError as exc:
            raise AirflowException(str(exc)) from None
        if ending.log:
            self.log.info("evaluation pod %s, the end of its log:\n%s", names.job, printable(ending.log).rstrip())
        if ending.exit_code == 0:
            return 0, "", ending.message
        why = _last_line(ending.message) if ending.exit_code is not None else ending.reason
        return ending.exit_code, f"{why or 'no message'} (pod {names.job}, {ending.phase}, exit code " \
                                 f"{ending.exit_code})", ""

    def _in_child(self, args: list[str]) -> tuple[int | None, str, str]:
        cmd = [self.python, *EVALUATOR[1:], *args]
        self.log.info("evaluating %s in a scrubbed child process: %s", self.model_dir, " ".join(cmd))
        try:
            run = run_isolated(lambda out: [*cmd, "--out", out], timeout=self.timeout, env=self.env)
        except TimeoutError as exc:
            raise AirflowException(str(exc)) from None
        except DataError as exc:  # the result file is a link, a FIFO, too large
            raise AirflowFailException(f"evaluation of {self.model_dir}: {exc}") from None
        if run.output.strip():
            self.log.info("evaluator output (the end):\n%s", printable(run.output).rstrip())
        code = run.returncode if run.returncode >= 0 else 128 - run.returncode  # killed by a signal: 128 + signal
        if code == 0:
            return 0, "", (run.result or b"").decode("utf-8", "replace")
        return code, f"{_last_line(run.output) or 'no message'} (exit code {code})", ""


def _last_line(output: str) -> str:
    """The evaluator's own closing line (``tfk8s: permanent failure (...)``), else the last line.
    Either may come from the model (it shares the evaluator's output): only ever a message."""
    lines = printable(output, 8000).strip().splitlines()
    ours = [line for line in lines if line.startswith("tfk8s: ")]
    return (ours or lines or [""])[-1][:1000]
