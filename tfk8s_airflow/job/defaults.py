"""Every default and limit of a job, defined once.

Why one module: a default written in the parser, again in a policy dataclass, again in an
operator's signature and again in the docs drifts (a release changed one and not the others).
Here each value is a constant; the parser applies it, the records and policies fall back on
it, the operators' parameters default to it, and the tables of docs/spec.md (the spec's field
table and "Defaults and limits") are generated from it by the docs test.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

__all__ = ["MAX_REPLICAS", "MAX_REPLICAS_ENV", "POLL_INTERVAL_S", "MAX_RESTARTS", "SCHEDULE_TIMEOUT_S",
           "STARTUP_TIMEOUT_S", "GROUP_RESTARTS", "INFRA_RESTARTS", "RESTART_BACKOFF_S", "NODE_LOST_GRACE_S",
           "FINISHED_POD_TTL_S", "MAX_BUDGET", "Default", "DEFAULTS", "max_replicas", "duration_text"]

#: The largest total replica count a spec may ask for, unless ``$TFK8S_MAX_REPLICAS`` says otherwise.
MAX_REPLICAS = 512
MAX_REPLICAS_ENV = "TFK8S_MAX_REPLICAS"
#: Seconds between the job watch's LISTs (``tf_job(poll_interval=)``, setup's record, the sensor's pokes).
POLL_INTERVAL_S = 5.0
#: The spec's defaults (docs/spec.md).
MAX_RESTARTS = 3
SCHEDULE_TIMEOUT_S = 300
STARTUP_TIMEOUT_S = 600
GROUP_RESTARTS = 0
INFRA_RESTARTS = 3
RESTART_BACKOFF_S = 10
NODE_LOST_GRACE_S = 60
FINISHED_POD_TTL_S = 600
#: The most ``group_restarts`` or ``infra_restarts`` a spec may ask for.
MAX_BUDGET = 100


def duration_text(seconds: int) -> str:
    """A duration as the docs write it: whole minutes above one minute as ``5m``, else seconds (``60s``)."""
    return f"{seconds // 60}m" if seconds > 60 and seconds % 60 == 0 else f"{seconds}s"


def max_replicas() -> int:
    """The replica limit in force: ``$TFK8S_MAX_REPLICAS`` when it is an integer, else :data:`MAX_REPLICAS`."""
    try:
        return int(os.environ.get(MAX_REPLICAS_ENV, MAX_REPLICAS))
    except ValueError:
        return MAX_REPLICAS


@dataclass(frozen=True)
class Default:
    """One row of docs/spec.md's "Defaults and limits" table."""

    name: str
    value: str
    doc: str


#: What docs/spec.md's "Defaults and limits" table shows (generated; the spec's own keys are in its field table).
DEFAULTS = (
    Default("replicas in total", f"{MAX_REPLICAS}",
            f"the largest job accepted; `${MAX_REPLICAS_ENV}`, `tfk8s validate --max-replicas` and "
            "`tf_job(max_replicas=)` change it"),
    Default("group_restarts, infra_restarts", f"at most {MAX_BUDGET}", "the largest recovery budget a spec may ask"),
    Default("poll_interval", f"{POLL_INTERVAL_S:g}s",
            "between the job watch's LISTs (`tf_job()`, `TFJobSetupOperator`) and the sensor's pokes"),
)
