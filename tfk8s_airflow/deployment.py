"""The deployment's policy as Airflow sees it: section ``[tfk8s]`` of Airflow's configuration.

``AIRFLOW__TFK8S__DEFAULT_ACTIVE_DEADLINE=2d`` (or ``default_active_deadline = 2d`` under
``[tfk8s]`` in airflow.cfg) sets it; without either, ``TFK8S_DEFAULT_ACTIVE_DEADLINE`` from the
environment, then the built-in default. See :mod:`tfk8s_airflow.job.policy`.
"""

from __future__ import annotations

import os
from typing import Any

from tfk8s_airflow.job.policy import DeploymentPolicy

SECTION = "tfk8s"


def _setting(name: str) -> Any:
    from airflow.configuration import conf

    value = conf.get(SECTION, name, fallback=None)
    if value in (None, ""):
        value = os.environ.get(f"TFK8S_{name.upper()}")
    return value


def deployment_policy() -> DeploymentPolicy:
    """The policy every job of this Airflow deployment is held to."""
    return DeploymentPolicy.from_settings(_setting)
