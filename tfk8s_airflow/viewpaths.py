"""The paths of the TF jobs view's routes: where the api-server mounts the view, and the route of
one replica's log file.

Why a ground-floor module: the view (:mod:`tfk8s_airflow.ui.app`) serves these routes, its rows
link to them, and the replica tasks store the **Replica log** extra link to them from the
triggerer (:mod:`tfk8s_airflow.links`); the format is written once, here.
"""

from __future__ import annotations

from urllib.parse import quote

__all__ = ["PREFIX", "replica_log_path"]

#: Where the api-server mounts the view's app (the plugin's ``fastapi_apps``).
PREFIX = "/tfk8s"


def replica_log_path(app: str, dag_id: str, run_id: str, job: str, replica: str) -> str:
    """``<app>/api/runs/<dag>/<run>/jobs/<job>/logs/<replica>``, each part quoted whole."""
    return (f"{app.rstrip('/')}/api/runs/{quote(dag_id, safe='')}/{quote(run_id, safe='')}"
            f"/jobs/{quote(job, safe='')}/logs/{quote(replica, safe='')}")
