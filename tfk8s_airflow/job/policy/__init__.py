"""What the deployment decides for every job: ``deployment`` (``DeploymentPolicy``, read from
``[tfk8s]``), ``settings`` (reading ``[tfk8s]`` as Airflow does, without Airflow), ``confinement``,
``preflight`` (can the job be placed: now, later, never) and ``tensorboard_url``.

This module is the layer's face for ``DeploymentPolicy`` and its shared checks; the modules of this
layer import each other directly, never this face.
"""

from tfk8s_airflow.configspec import SECTION
from tfk8s_airflow.job.policy.confinement import apparmor_annotation_problems, volume_kind_problems
from tfk8s_airflow.job.policy.deployment import (
    DEFAULT_GLUSTER_MOUNT,
    DeploymentPolicy,
    host_namespace_problems,
    package_secret_problems,
    restricted_problems,
    secret_references,
)

__all__ = ["DEFAULT_GLUSTER_MOUNT", "SECTION", "DeploymentPolicy", "apparmor_annotation_problems",
           "host_namespace_problems", "package_secret_problems", "restricted_problems", "secret_references",
           "volume_kind_problems"]
