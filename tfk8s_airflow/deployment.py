"""The deployment's policy as Airflow sees it: section ``[tfk8s]`` of Airflow's configuration.

Every setting of :class:`~tfk8s_airflow.job.policy.DeploymentPolicy` is read the same way:
``AIRFLOW__TFK8S__ALLOWED_HOST_PATHS=/mnt/a,/mnt/b`` (or ``allowed_host_paths = /mnt/a,/mnt/b``
under ``[tfk8s]`` in airflow.cfg); without either, ``TFK8S_ALLOWED_HOST_PATHS`` from the
environment; then the built-in default (the same order as the ``tfk8s`` command's,
:mod:`tfk8s_airflow.job.policy.settings`). See :mod:`tfk8s_airflow.job.policy` and docs/security.md.

Airflow also knows each setting's default, from the provider's metadata (:mod:`tfk8s_airflow.provider`,
for ``airflow config list``); a value Airflow gives that is that default is read as unset, so that
``TFK8S_<NAME>`` still applies (the defaults are the package's own: the same when nothing is set).
"""

from __future__ import annotations

import os
from typing import Any

from tfk8s_airflow.job.policy import SECTION, DeploymentPolicy
from tfk8s_airflow.job.policy.settings import with_fallback
from tfk8s_airflow.staging.fanout import CopySettings


def _airflow_setting(name: str) -> Any:
    from airflow.configuration import conf

    value = conf.get(SECTION, name, fallback=None)
    if value is not None and value == conf.get_default_value(SECTION, name):
        return None
    return value


def deployment_policy() -> DeploymentPolicy:
    """The policy every job of this Airflow deployment is held to."""
    return DeploymentPolicy.from_settings(with_fallback(_airflow_setting, os.environ))


def copy_settings() -> CopySettings:
    """The deployment's settings for staging copy pods (``[tfk8s] staging_*``, then ``TFK8S_STAGING_*``)."""
    return CopySettings.from_settings(with_fallback(_airflow_setting, os.environ))
