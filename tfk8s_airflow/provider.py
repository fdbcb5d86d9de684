"""Provider metadata for Airflow's ``apache_airflow_provider`` entry point.

Why register as a provider: Airflow then lists tfk8s-airflow with its version in
``airflow providers list`` and the UI, and finds its connection types and
extra links the same way it finds the cncf.kubernetes provider's. The metadata is complete, so
that a platform team's tools see the package as they see any provider:

- ``config``: every ``[tfk8s]`` setting (``airflow config list --defaults`` shows them), built from
  the settings' one declaration (:mod:`tfk8s_airflow.configspec`) on :data:`HOLDERS`;
- ``triggers`` (per integration), ``plugins``, ``extra-links``: ``airflow providers get
  tfk8s-airflow --full`` lists them.

- ``asset-uris``: the ``hdfs`` scheme of the staged partitions' URIs (``hdfs://<namenode>:<port>/<path>``),
  with its check, factory and OpenLineage converter (:mod:`tfk8s_airflow.lineage`). The volume copy, the
  model and the promoted model are ``file://`` URIs, whose scheme Airflow's common-io provider handles;
  the apache-hdfs provider, where it is installed too, handles ``hdfs`` the same way (one dataset name).

tests/unit/test_provider.py checks the metadata against Airflow's own schema.
"""

from __future__ import annotations

from typing import Any

from tfk8s_airflow import __version__
from tfk8s_airflow.configspec import SECTION, declared
from tfk8s_airflow.job.policy import DeploymentPolicy
from tfk8s_airflow.staging.fanout import CopySettings

#: The dataclasses whose fields are the ``[tfk8s]`` settings.
HOLDERS: tuple[type, ...] = (DeploymentPolicy, CopySettings)

JOBS = "TensorFlow on Kubernetes"
STAGING = "TensorFlow on Kubernetes: data staging"


def config() -> dict[str, Any]:
    """The ``config`` of the metadata: section ``[tfk8s]``, every setting with its type, default,
    description and example."""
    options = {}
    for holder in HOLDERS:
        for s in declared(holder):
            options[s.name] = {
                "description": f"{s.doc[:1].upper()}{s.doc[1:]}. Default: {s.default}. "
                               f"Fallback variable: {s.variable}.",
                "version_added": None,
                "type": s.kind,
                "example": s.example,
                "default": s.value,
            }
    return {SECTION: {"description": "The deployment's bounds on every TF job (docs/security.md) and its "
                                     "staging copy pods (docs/staging.md); each setting falls back to the "
                                     "environment variable TFK8S_<NAME>.",
                      "options": options}}


def get_provider_info() -> dict:
    return {
        "package-name": "tfk8s-airflow",
        "name": "TensorFlow on Kubernetes (tfk8s)",
        "description": "Distributed TensorFlow parameter-server/worker jobs on Kubernetes, "
                       "with data staged from HDFS or GlusterFS.",
        "versions": [__version__],
        "integrations": [
            {"integration-name": JOBS,
             "external-doc-url": "https://www.tensorflow.org/guide/distributed_training",
             "tags": ["software"]},
            {"integration-name": STAGING,
             "external-doc-url": "https://hadoop.apache.org/docs/stable/hadoop-project-dist/hadoop-hdfs/"
                                 "WebHDFS.html",
             "tags": ["software"]},
        ],
        # Listed by `airflow providers triggers`; the triggerer imports them from the installed package.
        "triggers": [
            {"integration-name": JOBS, "python-modules": ["tfk8s_airflow.triggers.job"]},
            {"integration-name": STAGING,
             "python-modules": ["tfk8s_airflow.triggers.hdfs", "tfk8s_airflow.triggers.staging"]},
        ],
        "plugins": [{"name": "tfk8s", "plugin-class": "tfk8s_airflow.plugin.TFK8sPlugin"}],
        "config": config(),
        # Listed by `airflow providers get tfk8s-airflow --full`; Airflow checks hdfs:// Asset URIs with the
        # handler, and the OpenLineage provider names their datasets with the converter.
        "asset-uris": [{"schemes": ["hdfs"], "handler": "tfk8s_airflow.lineage.sanitize_hdfs_uri",
                        "factory": "tfk8s_airflow.lineage.create_hdfs_asset",
                        "to_openlineage_converter": "tfk8s_airflow.lineage.convert_asset_to_openlineage"}],
        # Listed by `airflow providers links`; the api-server shows each from the XCom the task stored.
        "extra-links": ["tfk8s_airflow.links.TensorBoardLink", "tfk8s_airflow.links.ReplicaLogLink"],
    }
