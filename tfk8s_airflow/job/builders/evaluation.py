"""Evaluation of a job's model outside the Airflow worker: the evaluation pod and its result.

Why a pod: a SavedModel is a program (a TensorFlow graph can read files, the environment
and write anywhere it may), so loading it inside the Airflow worker gives it the worker's
environment (connection passwords) and file system. The evaluation pod is a pod of the
job's kind, built by the same builders as the job's replicas
(:func:`~tfk8s_airflow.job.builders.objects.plan_replicas`, :func:`~tfk8s_airflow.job.builders.objects.pod_manifest`):
the role's resources (GPUs included), node selector, tolerations and the spec's volumes, so
it sees the model and the held-out data where the job saw them. It differs from a replica
where evaluating needs less, and where the job's form must not steer it:

* it runs the deployment's ``evaluation_image`` (``[tfk8s]``), not the job's (the form may
  choose that one): ``python -m tfk8s_airflow.pod.trainer.evaluate`` and nothing of the job's
  command, code, environment, sidecars or init containers;
* every volume is mounted read-only, so the model cannot change itself or the data;
* no TF_CONFIG, no shard list, no Service (no peers), no service-account token;
* ``restartPolicy: Never`` and ``activeDeadlineSeconds`` of the evaluation's timeout;
* its labels say ``tfk8s.io/evaluation`` (it is no job's pod: a teardown never selects it).

The pod reports its result as its termination message (at most 4096 bytes, by the kubelet)
and :func:`read_result` is the only way the worker takes it: exactly the keys of
:data:`~tfk8s_airflow.contract.EVAL_RESULT_KEYS`, finite numbers in range, a short ``source``.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from tfk8s_airflow import untrusted
from tfk8s_airflow.contract import (
    CODE_VOLUME,
    EVAL_RESULT_KEYS,
    EVAL_RESULT_MAX_BYTES,
    LABEL_EVALUATION,
    LABEL_JOB,
    SHARDS_VOLUME,
)
from tfk8s_airflow.exceptions import EvaluationResultError, SpecError
from tfk8s_airflow.job.builders.objects import JobNames, plan_replicas, pod_manifest
from tfk8s_airflow.job.policy import DeploymentPolicy
from tfk8s_airflow.job.spec import TFJobSpec

__all__ = ["EVALUATOR", "SOURCES", "evaluator_args", "evaluation_pod", "evaluation_names", "evaluation_role",
           "read_result",
           "printable"]

#: The evaluator's command in the pod (and, with the worker's interpreter, in a child process).
EVALUATOR = ("python", "-m", "tfk8s_airflow.pod.trainer.evaluate")
SOURCES = ("auto", "saved_model", "checkpoint")
#: The role whose pod settings the evaluation pod takes: the first the spec has.
ROLE_PREFERENCE = ("evaluator", "worker", "chief")
_SOURCE = re.compile(r"^(saved_model|checkpoint:[A-Za-z0-9._-]{1,200})$")
_MAX_COUNT = 10**12


def evaluator_args(model_dir: str, heldout: Sequence[str], threshold: float | None, source: str) -> list[str]:
    """The evaluator's arguments (after ``python -m tfk8s_airflow.pod.trainer.evaluate``)."""
    if source not in SOURCES:
        raise SpecError(f"must be one of {', '.join(SOURCES)}, got {source!r}", field="source")
    if not heldout:
        raise SpecError("give at least one held-out file", field="heldout")
    args = ["--model-dir", str(model_dir), "--source", source]
    for path in heldout:
        args += ["--heldout", str(path)]
    if threshold is not None:
        args += ["--threshold", repr(float(threshold))]
    return args


def evaluation_role(spec: TFJobSpec) -> str:
    role = next((r for r in ROLE_PREFERENCE if spec.replicas(r)), None)
    if role is None:
        raise SpecError("the spec has no evaluator, worker or chief to take the evaluation pod's settings from",
                        field="spec")
    return role


def evaluation_pod(spec: TFJobSpec, names: JobNames, *, model_dir: str, heldout: Sequence[str],
                   threshold: float | None = None, source: str = "auto", timeout: int = 600,
                   env: Mapping[str, str] | None = None, policy: DeploymentPolicy | None = None,
                   image: str | None = None) -> dict[str, Any]:
    """The evaluation pod of ``spec``: named ``names.job``, in ``names.namespace``; paths as the pod sees them.

    ``image``: the evaluator's image; by default the deployment's ``evaluation_image`` (``policy``'s),
    never the spec's. Of the spec, the pod takes only where it runs (resources, node placement,
    the pod template's scheduling fields) and what it reads (the volumes, read-only): none of its
    environment, sidecars or init containers, whose values the job's form may choose (a
    ``PYTHONPATH`` on the shared volume would replace the evaluator's code). ``env``: the DAG
    author's (the operator's).
    """
    policy = policy or DeploymentPolicy()
    role = evaluation_role(spec)
    base = next(r for r in plan_replicas(spec, names, policy=policy) if r.role == role and r.index == 0)
    keep = [{"name": str(k), "value": str(v)} for k, v in (env or {}).items()]
    labels = {k: v for k, v in base.labels.items() if not k.startswith("tfk8s.io/") or k in names.identity}
    labels.pop(LABEL_JOB, None)
    labels.update({"app.kubernetes.io/component": "evaluation", LABEL_EVALUATION: names.job})
    volumes = []
    for vol in base.volumes:
        if vol["name"] in (SHARDS_VOLUME, CODE_VOLUME):
            continue
        vol = dict(vol)
        if "persistentVolumeClaim" in vol:
            vol["persistentVolumeClaim"] = {**vol["persistentVolumeClaim"], "readOnly": True}
        volumes.append(vol)
    mounts = [{**m, "readOnly": True} for m in base.volume_mounts if m["name"] not in (SHARDS_VOLUME, CODE_VOLUME)]
    replica = dataclasses.replace(
        base, pod_name=names.job, hostname="evaluation", command=list(EVALUATOR),
        args=[*evaluator_args(model_dir, heldout, threshold, source), "--termination-log"],
        env=keep, env_from=[], tf_config=None, labels=labels, restart_policy="Never", volumes=volumes,
        volume_mounts=mounts, init_containers=[], sidecars=[], image=image or policy.evaluation_image,
        extra_ports=[], container_extra={})
    pod = pod_manifest(spec, names, replica)
    pod_spec = pod["spec"]
    pod_spec.pop("subdomain", None)
    pod_spec.pop("shareProcessNamespace", None)
    pod_spec["activeDeadlineSeconds"] = int(timeout)
    pod_spec["automountServiceAccountToken"] = False
    container = pod_spec["containers"][0]
    container.pop("ports", None)
    # A failed evaluation says why through its log's tail; a successful one writes its result.
    container["terminationMessagePolicy"] = "FallbackToLogsOnError"
    return pod


def evaluation_names(spec: TFJobSpec, dag_id: str, run_id: str, task: str) -> JobNames:
    """The evaluation's names (the pod is named ``job``): unique per (DAG, run, task), stable
    across the task's retries, never a training job's (whose group is the task group)."""
    return JobNames.for_run(spec, run_id, task, dag_id)


def _number(doc: Mapping[str, Any], key: str, lo: float, hi: float, integer: bool) -> float | int:
    value = doc[key]
    if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)):
        raise EvaluationResultError(f"evaluation result: {key} must be {'an integer' if integer else 'a number'}")
    if not (math.isfinite(value) and lo <= value <= hi):
        raise EvaluationResultError(f"evaluation result: {key} is outside [{lo}, {hi}]")
    return int(value) if integer else float(value)


def read_result(data: str | bytes | None) -> dict[str, Any]:
    """The evaluator's result, validated; :class:`EvaluationResultError` for anything else.

    The text comes from the evaluated model's own process, so nothing of it is trusted: at
    most :data:`EVAL_RESULT_MAX_BYTES`, one JSON object with exactly the keys of
    :data:`EVAL_RESULT_KEYS`, ``accuracy`` and ``positive_rate`` in [0, 1], ``examples``
    at least 1, ``global_step`` at least 0, ``source`` ``saved_model`` or ``checkpoint:<name>``.
    Error messages never repeat the text.
    """
    raw = data.encode("utf-8", "replace") if isinstance(data, str) else (data or b"")
    if not raw.strip():
        raise EvaluationResultError("the evaluation reported no result")
    if len(raw) > EVAL_RESULT_MAX_BYTES:
        raise EvaluationResultError(f"the evaluation's result is larger than {EVAL_RESULT_MAX_BYTES} bytes")
    try:  # the shared bounded reader: nested ~2,000 levels within the size bound, json.loads raised RecursionError
        doc = untrusted.loads(raw, max_bytes=EVAL_RESULT_MAX_BYTES, strict=True, what="the evaluation's result")
    except ValueError:
        raise EvaluationResultError("the evaluation's result is not a JSON object") from None
    if not isinstance(doc, dict) or set(doc) != set(EVAL_RESULT_KEYS):
        raise EvaluationResultError(f"the evaluation's result must have exactly the keys {', '.join(EVAL_RESULT_KEYS)}")
    source = doc["source"]
    if not isinstance(source, str) or not _SOURCE.match(source):
        raise EvaluationResultError("evaluation result: source must be saved_model or checkpoint:<name>")
    return {"accuracy": _number(doc, "accuracy", 0.0, 1.0, False),
            "examples": _number(doc, "examples", 1, _MAX_COUNT, True),
            "global_step": _number(doc, "global_step", 0, 2**63 - 1, True),
            "source": source,
            "positive_rate": _number(doc, "positive_rate", 0.0, 1.0, False)}


def printable(text: str, limit: int = 4000) -> str:
    """Text from a pod or a child process, fit for a task log or an error message: its last
    ``limit`` characters, control characters (terminal escapes) replaced."""
    tail = text[-limit:]
    return "".join(c if c.isprintable() or c in "\n\t" else "?" for c in tail)
