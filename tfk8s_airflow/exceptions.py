"""Every error the project raises, in one place.

Why one module: operators decide retry-or-fail by error class alone. Errors that
subclass :class:`PermanentError` can never succeed on retry (bad input, a job that
failed by its own policy), so operators turn them into ``AirflowFailException``;
everything else may be transient and is left to Airflow's retries. This module
imports nothing from Airflow so pod-side code (``tfk8s_airflow.pod.runtime``) can use it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


class TFK8sError(Exception):
    """Base of all tfk8s-airflow errors."""


class PermanentError(TFK8sError):
    """Retrying cannot help: fail the task without retry."""


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


@dataclass(frozen=True)
class Problem:
    """One problem in a user's input: where it is and how to fix it.

    Its text is bounded (a field path or message quoting a huge input is cut), so an error
    message never grows with the input.
    """

    field: str
    message: str
    fix: str = ""

    def __str__(self) -> str:
        text = f"{_clip(self.field, 200)}: {_clip(self.message, 600)}"
        return f"{text} (fix: {_clip(self.fix, 600)})" if self.fix else text


class SpecError(PermanentError, ValueError):
    """A job spec (or operator argument) is invalid; lists every problem found.

    The message shows the first :attr:`SHOWN` problems; ``problems`` holds all of them.
    """

    SHOWN = 50

    def __init__(self, problems: Sequence[Problem] | Problem | str, field: str = "spec"):
        if isinstance(problems, str):
            problems = [Problem(field, problems)]
        elif isinstance(problems, Problem):
            problems = [problems]
        self.problems: tuple[Problem, ...] = tuple(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems[:self.SHOWN])
        if len(self.problems) > self.SHOWN:
            lines += f"\n  - ... and {len(self.problems) - self.SHOWN} more"
        super().__init__(f"invalid TF job spec ({len(self.problems)} problem(s)):\n{lines}")

    @property
    def fields(self) -> tuple[str, ...]:
        return tuple(p.field for p in self.problems)


class TemplateError(PermanentError):
    """A Jinja2 template failed to render (undefined variable, bad YAML)."""


class QuotaExceededError(PermanentError):
    """The whole job does not fit in the namespace's ResourceQuota."""


class CapacityError(PermanentError):
    """The pre-flight found the job can never be placed on the cluster's nodes, or no room freed up for it
    within its ``schedule_timeout`` (tfk8s_airflow.job.policy.preflight)."""


class JobFailedError(PermanentError):
    """The training job failed by its own rules (exit code, unschedulable, deadline...)."""

    def __init__(self, message: str, summary: dict | None = None):
        super().__init__(message)
        self.summary = summary or {}


class RecordError(PermanentError):
    """A record handed between tasks (XCom, trigger event) cannot be read by this release."""


class KubernetesApiError(TFK8sError):
    """A Kubernetes API call failed; says what was being done. Retryable unless 4xx."""

    def __init__(self, action: str, status: int | None, reason: str):
        self.action = action
        self.status = status
        self.reason = reason
        super().__init__(f"Kubernetes API error while {action}: HTTP {status}: {reason}")


class PermanentKubernetesApiError(KubernetesApiError, PermanentError):
    """A Kubernetes API rejection that will not change on retry (400/403/422...)."""


class KubernetesConfigError(PermanentError):
    """The Kubernetes connection or its kubeconfig is missing or unreadable: no retry reads it."""


class AirflowFeatureMissingError(TFK8sError):
    """The running Airflow lacks a feature that a newer one has (tfk8s_airflow.features): degrade."""


class DataError(PermanentError):
    """Input data is missing, empty, or unreadable in a way retries cannot fix."""


class PathSafetyError(DataError):
    """A path escapes its configured root (``..``, absolute outside root, symlink)."""


class StagingError(TFK8sError):
    """Copying or verifying staged data failed (may be transient)."""


class NameTooLongError(StagingError, DataError):
    """A file's name (with the hidden name it is written under) is longer than the volume allows."""


class HdfsUnavailableError(StagingError):
    """No NameNode answered (all HA NameNodes tried)."""


class PeerTimeoutError(TFK8sError):
    """A replica's peers did not become reachable within the bounded wait."""


class RuntimeConfigError(PermanentError):
    """Pod-side configuration (TF_CONFIG, shard file) is missing or malformed."""


class ModelMissingError(PermanentError):
    """No SavedModel or checkpoint where the trained model should be."""


class MetricBelowThresholdError(PermanentError):
    """The evaluated model is worse than the required threshold (do not promote it)."""

    def __init__(self, metric: str, value: float, threshold: float, detail: str = ""):
        self.metric = metric
        self.value = value
        self.threshold = threshold
        extra = f" ({detail})" if detail else ""
        super().__init__(f"{metric} {value:.4f} is below the threshold {threshold:.4f}{extra}")


class EvaluationResultError(PermanentError):
    """What an evaluation pod or child process reported is not an evaluation result (wrong keys,
    a number out of range, too large): the model is not judged by it."""


class MissingInputError(DataError):
    """An input path (HDFS or volume) does not exist; waiting for it is the sensor's job."""


class UntrustedJSONError(DataError, ValueError):
    """A value someone else wrote (an annotation, a log's progress line, a record or journal on the
    volume) is not a bounded JSON document: too large, nested too deep, or not JSON
    (:mod:`tfk8s_airflow.untrusted`)."""
