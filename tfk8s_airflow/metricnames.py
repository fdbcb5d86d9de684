"""Every metric the package emits: its one definition (name, kind, unit, tags, meaning).

The names go to Airflow's own metrics (``[metrics]``: StatsD, Datadog or OpenTelemetry, as the deployment
configured them) under one prefix, ``tfk8s.``, after Airflow's own ``statsd_prefix`` / ``otel_prefix``.
docs/observability.md's table is checked against :data:`CATALOG` by the docs test, and
:func:`tfk8s_airflow.metrics.emit` refuses a name that is not in it, so what the docs list and what the code
emits cannot differ. Pure: no Airflow, no Kubernetes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["PREFIX", "MetricDef", "CATALOG", "BY_NAME", "Point", "JOB_TAGS"]

PREFIX = "tfk8s."
Kind = Literal["counter", "gauge", "timer"]
#: The tags of every job metric (values of at most 63 characters; a missing one is left out).
JOB_TAGS = ("dag", "task", "job", "queue")


@dataclass(frozen=True)
class MetricDef:
    name: str
    kind: Kind
    unit: str
    tags: tuple[str, ...]
    meaning: str


CATALOG: tuple[MetricDef, ...] = (
    MetricDef("tfk8s.job.admission_wait", "timer", "ms", JOB_TAGS,
              "from setup creating the job to its pods being admitted (gates released, Kueue's admission, the "
              "pre-flight's wait): the time the job queued"),
    MetricDef("tfk8s.job.time_to_running", "timer", "ms", JOB_TAGS,
              "from setup creating the job to every replica Running"),
    MetricDef("tfk8s.job.duration", "timer", "ms", (*JOB_TAGS, "outcome", "class"),
              "from setup creating the job to its verdict; outcome succeeded | failed | timed_out, class the "
              "failure class (none for a success)"),
    MetricDef("tfk8s.job.outcome", "counter", "jobs", (*JOB_TAGS, "outcome", "class"),
              "one per job verdict, by outcome and failure class"),
    MetricDef("tfk8s.job.restarts", "counter", "attempts", (*JOB_TAGS, "class", "action"),
              "one per recovery attempt (a group restart or a replica replacement), by the failure class that "
              "caused it"),
    MetricDef("tfk8s.replica.exits", "counter", "replicas", (*JOB_TAGS, "role", "outcome"),
              "one per replica that exited by the job's end, by role and outcome (succeeded | failed)"),
    MetricDef("tfk8s.job.steps_per_second", "gauge", "steps/s", JOB_TAGS,
              "the lead replica's training steps per second over the job's progress history (its end)"),
    MetricDef("tfk8s.job.examples_per_second", "gauge", "examples/s", JOB_TAGS,
              "the last examples/s the lead replica reported through the progress protocol"),
    MetricDef("tfk8s.staging.bytes", "counter", "bytes", ("dag", "task", "executor"),
              "bytes a staging task copied (or checksummed, on GlusterFS) and published"),
    MetricDef("tfk8s.staging.mib_per_second", "gauge", "MiB/s", ("dag", "task", "executor"),
              "a staging task's throughput, bytes over its copy's wall time"),
    MetricDef("tfk8s.teardown.leftovers", "gauge", "objects", JOB_TAGS,
              "objects of the job teardown could not delete (should always be 0)"),
)

BY_NAME = {m.name: m for m in CATALOG}


@dataclass(frozen=True)
class Point:
    """One value to emit: ``value`` is seconds for a timer (emitted in milliseconds), else as is."""

    name: str
    value: float
    tags: tuple[tuple[str, str], ...] = ()
