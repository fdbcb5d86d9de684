"""What the deployment decides for every job, whatever its spec says (the spec may not override it).

Why separate from the spec: the spec comes from DAG authors and, through ``params``, from
anyone allowed to trigger a DAG; these bounds come from whoever runs Airflow. They are read
from Airflow's configuration section ``[tfk8s]`` (so ``AIRFLOW__TFK8S__<NAME>`` works) by
:mod:`tfk8s_airflow.deployment`, or from ``TFK8S_<NAME>`` variables where there is no
Airflow (the ``tfk8s`` CLI). This module only parses and holds them.

``default_active_deadline``: a job whose spec sets no ``active_deadline`` still ends. Without
it a job that landed on the wrong nodes, or whose teardown never ran, would keep its
parameter servers forever (they never exit on their own). The pods get it as
``activeDeadlineSeconds``, so Kubernetes itself stops them even if Airflow is gone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tfk8s_airflow.exceptions import SpecError
from tfk8s_airflow.job.fields import parse_duration

#: 24 hours: long enough for a day's retraining, short enough that a forgotten job ends.
DEFAULT_ACTIVE_DEADLINE_S = 24 * 3600


@dataclass(frozen=True)
class DeploymentPolicy:
    """The deployment's bounds on every job."""

    default_active_deadline: int = DEFAULT_ACTIVE_DEADLINE_S

    @classmethod
    def from_settings(cls, get: Callable[[str], Any]) -> DeploymentPolicy:
        """From a lookup ``get(name) -> value or None`` (Airflow config, or the environment)."""
        raw = get("default_active_deadline")
        deadline = DEFAULT_ACTIVE_DEADLINE_S
        if raw not in (None, ""):
            secs = parse_duration(raw)
            if secs is None or secs <= 0:
                raise SpecError(f"[tfk8s] default_active_deadline must be a positive duration such as 86400, "
                                f"90m or 2d, got {raw!r} (fix: correct the deployment's setting)",
                                field="default_active_deadline")
            deadline = secs
        return cls(default_active_deadline=deadline)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> DeploymentPolicy:
        """From ``TFK8S_<NAME>`` variables (``TFK8S_DEFAULT_ACTIVE_DEADLINE``)."""
        return cls.from_settings(lambda name: env.get(f"TFK8S_{name.upper()}"))

    def active_deadline(self, spec: Any) -> int:
        """The job's deadline in seconds: the spec's, else the deployment's default."""
        return int(spec.active_deadline or self.default_active_deadline)
