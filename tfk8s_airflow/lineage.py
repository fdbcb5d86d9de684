"""Lineage: the ``hdfs`` Asset URIs of the provider's metadata, and the OpenLineage facets of the operators.

Why here and optional: deployments that collect lineage install the OpenLineage provider
(``apache-airflow-providers-openlineage``); its listener asks each operator for
``get_openlineage_facets_on_start()`` and ``get_openlineage_facets_on_complete(task_instance)``. The staging,
setup and promotion operators answer through :func:`operator_lineage`, which imports OpenLineage's classes
only when it is called, so the package imports, parses and runs without the provider (the methods are
never called then). The names come from :mod:`tfk8s_airflow.assetnames`, the job's facet from
:mod:`tfk8s_airflow.job.run.lineage`.

- inputs and outputs: OpenLineage datasets of the HDFS partition, the staged directory, the model
  directory and the promoted model (docs/observability.md, "Lineage");
- the run facet ``tfk8s_job`` (setup's): the job's spec without environment values, commands or
  arguments.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any

from tfk8s_airflow.assetnames import dataset_name, hdfs_uri, sanitize_hdfs_uri

__all__ = ["JOB_FACET", "SCHEMA_URL", "convert_asset_to_openlineage", "create_hdfs_asset", "operator_lineage",
           "sanitize_hdfs_uri"]

#: The run facet's key in an OpenLineage event's ``run.facets``.
JOB_FACET = "tfk8s_job"
#: The facet's ``_schemaURL`` (a URI OpenLineage requires of every facet): its fields are described in
#: docs/observability.md, "Lineage"; the last part is the facet's version, raised when a field changes.
SCHEMA_URL = "urn:tfk8s-airflow:facet:tfk8s_job:1"


def create_hdfs_asset(*, host: str, path: str, port: int = 8020, extra: dict | None = None) -> Any:
    """The provider metadata's ``hdfs`` Asset factory: ``Asset(uri="hdfs://host:port/path")``."""
    from airflow.sdk import Asset

    return Asset(uri=hdfs_uri(f"{host}:{port}", path), extra=extra)


def convert_asset_to_openlineage(asset: Any, lineage_context: Any = None) -> Any:
    """The provider metadata's ``hdfs`` converter: an Asset to OpenLineage's dataset (the names of
    :func:`tfk8s_airflow.assetnames.dataset_name`)."""
    from openlineage.client.event_v2 import Dataset

    namespace, name = dataset_name(asset.uri)
    return Dataset(namespace=namespace, name=name)


@functools.cache
def _job_facet_class() -> type:
    from attrs import define
    from openlineage.client.facet_v2 import RunFacet

    @define
    class TFK8sJobRunFacet(RunFacet):
        """The TF job a setup task created: its spec without environment values, commands or arguments."""

        job: dict

        @staticmethod
        def _get_schema() -> str:
            return SCHEMA_URL

    return TFK8sJobRunFacet


def operator_lineage(inputs: Iterable[str] = (), outputs: Iterable[str] = (),
                     job: Mapping[str, Any] | None = None) -> Any:
    """OpenLineage's ``OperatorLineage`` of an operator: datasets from Asset URIs (duplicates dropped), and the
    ``tfk8s_job`` run facet when ``job`` is given. Called by the OpenLineage provider only, so it is there."""
    from airflow.providers.openlineage.extractors import OperatorLineage
    from openlineage.client.event_v2 import InputDataset, OutputDataset

    def datasets(uris: Iterable[str], kind: type) -> list[Any]:
        names = dict.fromkeys(dataset_name(u) for u in uris if u)
        return [kind(namespace=ns, name=name) for ns, name in names]

    run_facets = {JOB_FACET: _job_facet_class()(job=dict(job))} if job is not None else {}
    return OperatorLineage(inputs=datasets(inputs, InputDataset), outputs=datasets(outputs, OutputDataset),
                           run_facets=run_facets)
