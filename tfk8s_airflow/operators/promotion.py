"""Promotion of an evaluated model to ``serving/`` as an Airflow task.

The logic lives in :mod:`tfk8s_airflow.volume.promotion`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator

from tfk8s_airflow.operators.base import fail_permanently
from tfk8s_airflow.volume import promotion


class ModelPromoteOperator(BaseOperator):
    """Copies the model to ``serving_root/versions/<version>`` if it beats the current one.

    :param metrics: the evaluation result (XComArg) holding ``metric``.
    :param version: the version name, e.g. ``"{{ ds }}"`` (idempotent per logical date).
    """

    template_fields: Sequence[str] = ("model_dir", "serving_root", "version", "metrics")

    def __init__(self, *, model_dir: str, serving_root: str, metrics: Any, version: str = "{{ ds }}",
                 metric: str = "accuracy", higher_is_better: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
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
        return result
