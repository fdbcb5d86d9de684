"""The Airflow plugin: template helpers for DAG authors, and the TF jobs view of the UI.

Why a plugin next to the provider: macros (the job name a run will use) and UI views are
plugin features. The view is a FastAPI app the api-server mounts under ``/tfk8s``
(``fastapi_apps``), shown inside the UI in three places (``external_views``): an entry in the
navigation (Browse > TF jobs, at ``/plugin/tf-jobs``: the newest runs' jobs), a tab of every DAG
run (**TF job**: that run's jobs) and a tab of every task instance (**TF job**: its run's jobs,
the task's own job marked and first, and for a replica task that replica's row); see
:mod:`tfk8s_airflow.ui`. The UI fills in ``{DAG_ID}``, ``{RUN_ID}``, ``{TASK_ID}`` and
``{MAP_INDEX}`` of a tab's ``href`` from the page it is on.
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
    external_views = [
        {"name": "TF jobs", "href": f"{UI_PREFIX}/jobs", "url_route": "tf-jobs", "destination": "nav",
         "category": "browse"},
        {"name": "TF job", "href": f"{UI_PREFIX}/jobs?dag_id={{DAG_ID}}&run_id={{RUN_ID}}", "url_route": "tf-job",
         "destination": "dag_run"},
        {"name": "TF job",
         "href": f"{UI_PREFIX}/jobs?dag_id={{DAG_ID}}&run_id={{RUN_ID}}&task_id={{TASK_ID}}&map_index={{MAP_INDEX}}",
         "url_route": "tf-job-task", "destination": "task_instance"},
    ]
