"""Promotion of an evaluated model to ``serving/`` as an Airflow task.

The logic lives in :mod:`tfk8s_airflow.volume.promotion`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator

from tfk8s_airflow.assetnames import location_uri
from tfk8s_airflow.lineage import operator_lineage
from tfk8s_airflow.operators.base import fail_permanently
from tfk8s_airflow.volume import promotion


class ModelPromoteOperator(BaseOperator):
    """Copies the model to ``serving_root/versions/<version>`` if it beats the current one.

    :param metrics: the evaluation result (XComArg) holding ``metric``.
    :param version: the version name, e.g. ``"{{ ds }}"`` (idempotent per logical date).
    :param model_asset: an Asset that gets an event (extra: version, metric, value, path,
        previous, uri: ``file://`` of the promoted version) each time a model is promoted, and none
        when it is not: a deployment DAG scheduled on it runs for new models only. It is emitted
        through the task's alias
        ``<asset name>/promotions``.
    """

    template_fields: Sequence[str] = ("model_dir", "serving_root", "version", "metrics")

    def __init__(self, *, model_dir: str, serving_root: str, metrics: Any, version: str = "{{ ds }}",
                 metric: str = "accuracy", higher_is_better: bool = True, model_asset: Any = None,
                 **kwargs: Any) -> None:
        if model_asset is not None:
            from airflow.sdk import AssetAlias

            kwargs["outlets"] = [*(kwargs.get("outlets") or []), AssetAlias(f"{model_asset.name}/promotions")]
        super().__init__(**kwargs)
        self.model_asset = model_asset
        self.model_dir = model_dir
        self.serving_root = serving_root
        self.metrics = metrics
        self.version = version
        self.metric = metric
        self.higher_is_better = higher_is_better

    def execute(self, context: Any) -> dict[str, Any]:
        with fail_permanently():
            result = promotion.promote(self.model_dir, self.serving_root, self.version, dict(self.metrics),
                                       self.metric, self.higher_is_better)
        self.log.info("%s: %s", "promoted" if result["promoted"] else "not promoted", result["reason"])
        self._tfk8s_result = result  # for the lineage hooks below
        if self.model_asset is not None and result["promoted"] and not result.get("already"):
            alias = next(o for o in self.outlets if getattr(o, "name", "") == f"{self.model_asset.name}/promotions")
            context["outlet_events"][alias].add(self.model_asset, extra={
                "version": result["version"], "metric": self.metric, "value": result["value"],
                "path": result["path"], "previous": result.get("previous"),
                "uri": location_uri(str(result["path"]))})
        return result

    def get_openlineage_facets_on_start(self) -> Any:
        return operator_lineage(inputs=[u for u in (location_uri(str(self.model_dir)),) if u])

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """Input: the model directory; output: the promoted version under ``serving_root``, when it was promoted
        (none when it did not beat the current model)."""
        result = getattr(self, "_tfk8s_result", None) or {}
        path = result.get("path") if result.get("promoted") else None
        outputs = [u for u in (location_uri(str(path)) if path else None,) if u]
        return operator_lineage(inputs=[u for u in (location_uri(str(self.model_dir)),) if u], outputs=outputs)
