"""The Airflow plugin: template helpers for DAG authors, and the TF jobs view of the UI.

Why a plugin next to the provider: macros (the job name a run will use) and UI views are
plugin features. The view is a FastAPI app the api-server mounts under ``/tfk8s``
(``fastapi_apps``) and an entry in the UI's navigation (``external_views``, shown inside the
UI at ``/plugin/tf-jobs``); see :mod:`tfk8s_airflow.ui`.
"""

from __future__ import annotations

from typing import Any

from airflow.plugins_manager import AirflowPlugin

from tfk8s_airflow.job import naming
from tfk8s_airflow.ui import PREFIX as UI_PREFIX


def tfk8s_job_name(base: str, run_id: str, group: str = "") -> str:
    """Macro: ``{{ macros.tfk8s.tfk8s_job_name(dag.dag_id, run_id, 'train') }}``."""
    return naming.job_name(base, run_id, group)


class _ApiServerApps:
    """``fastapi_apps``, built only when read (by the api-server, or a listing of plugins).

    Every task process loads the plugins for their macros; the app imports the api-server's
    own modules, which those processes need not pay for.
    """

    def __get__(self, obj: object, owner: type | None = None) -> list[dict[str, Any]]:
        from tfk8s_airflow.ui.app import app

        return [{"app": app, "url_prefix": UI_PREFIX, "name": "TF jobs"}]


class TFK8sPlugin(AirflowPlugin):
    name = "tfk8s"
    macros = [tfk8s_job_name]
    fastapi_apps = _ApiServerApps()
    external_views = [{"name": "TF jobs", "href": f"{UI_PREFIX}/jobs", "url_route": "tf-jobs",
                       "destination": "nav", "category": "browse"}]
