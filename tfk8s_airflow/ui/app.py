"""The TF jobs view: a FastAPI app the api-server mounts under ``/tfk8s`` (the plugin's ``fastapi_apps``).

Routes:

* ``GET /tfk8s/jobs`` the page (HTML and a little JavaScript, no build step), also shown inside
  the Airflow UI (the plugin's ``external_views``: the navigation's entry, a DAG run's tab and a
  task instance's tab); ``?dag_id=&run_id=`` shows one run, ``&task_id=&map_index=`` marks the job
  of that task (and, for a replica task, that replica);
* ``GET /tfk8s/api/jobs`` the rows of the newest runs' jobs (``?dag_id=`` one DAG, ``?limit=``: 50 by
  default, at most 500; the pods of 50 running jobs at most are listed, :func:`~tfk8s_airflow.ui.sources.with_live`);
* ``GET /tfk8s/api/runs/{dag_id}/{run_id}/jobs`` the jobs of one run (``?task_id=&map_index=``: marked);
* ``GET /tfk8s/api/runs/{dag_id}/{run_id}/jobs/{job}/logs/{replica}`` one replica's archived log.

Authorisation is the running api-server's auth manager's, never one of ours: the caller is the
user of Airflow's own session (the UI's ``_token`` cookie, or a bearer token), resolved by
Airflow's ``get_user`` (401 without one); a job is listed only for a DAG the auth manager lets
the user read (``get_authorized_dag_ids``), and every per-DAG route asks ``is_authorized_dag``
(403): GET on the DAG's task instances for the rows, GET on its task logs for an archived log.
"""

from __future__ import annotations

from importlib.resources import files
from typing import Annotated, Any
from urllib.parse import urlsplit

from airflow.api_fastapi.app import get_auth_manager
from airflow.api_fastapi.auth.managers.models.base_user import BaseUser
from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity, DagDetails
from airflow.api_fastapi.common.db.common import SessionDep
from airflow.api_fastapi.core_api.security import get_user
from fastapi import Depends, FastAPI, HTTPException, Query, Request, status
from fastapi.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles

from tfk8s_airflow.exceptions import DataError
from tfk8s_airflow.ui import PREFIX
from tfk8s_airflow.ui.rows import JobSources, Links, job_row, log_roots, mark_task, sort_rows
from tfk8s_airflow.ui.sources import DEFAULT_LIMIT, MAX_LIMIT, find_jobs
from tfk8s_airflow.volume.logs import read_archived_log

STATIC = files("tfk8s_airflow.ui") / "static"
#: The page may load only its own script and style, and talk only to its own origin.
PAGE_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
            "frame-ancestors 'self'; base-uri 'none'; form-action 'none'")
#: An archived log is untrusted text: shown as text, never rendered, never sniffed.
LOG_HEADERS = {"X-Content-Type-Options": "nosniff", "Content-Security-Policy": "default-src 'none'; sandbox",
               "Cache-Control": "no-store"}

UserDep = Annotated[BaseUser, Depends(get_user)]

app = FastAPI(title="tfk8s: TF jobs", description="Running and recent TensorFlow jobs of Airflow runs",
              docs_url=None, redoc_url=None, openapi_url=None)
app.mount("/static", StaticFiles(directory=str(STATIC)), name="static")


def _links(request: Request) -> Links:
    from airflow.configuration import conf

    ui = urlsplit(conf.get("api", "base_url", fallback="/") or "/").path or "/"
    return Links(ui=ui if ui.endswith("/") else ui + "/", app=request.scope.get("root_path") or PREFIX)


def _may_read(user: BaseUser, dag_id: str, entity: DagAccessEntity) -> bool:
    from airflow.models.dag import DagModel

    return get_auth_manager().is_authorized_dag(
        method="GET", access_entity=entity, user=user,
        details=DagDetails(id=dag_id, team_name=DagModel.get_team_name(dag_id)))


def _require(user: BaseUser, dag_id: str, entity: DagAccessEntity) -> None:
    if not _may_read(user, dag_id, entity):
        raise HTTPException(status.HTTP_403_FORBIDDEN, f"you may not read the DAG {dag_id!r}")


def _readable_dag_ids(user: BaseUser) -> set[str]:
    return get_auth_manager().get_authorized_dag_ids(user=user, method="GET")


@app.get("/jobs", response_class=HTMLResponse, include_in_schema=False)
async def page(request: Request) -> Response:
    """The page; its data comes from the API routes, so it holds nothing a user may not read."""
    try:
        await get_user(request, None, None)
    except HTTPException as exc:
        if exc.status_code != status.HTTP_401_UNAUTHORIZED:
            raise
        login = get_auth_manager().get_url_login(next_url=str(request.url))
        return RedirectResponse(login, status_code=status.HTTP_303_SEE_OTHER)
    html = (STATIC / "jobs.html").read_text(encoding="utf-8")
    return HTMLResponse(html, headers={"Content-Security-Policy": PAGE_CSP, "Cache-Control": "no-store"})


def _rows(request: Request, jobs: list[JobSources]) -> list[dict[str, Any]]:
    links = _links(request)
    return sort_rows([job_row(j, links) for j in jobs])


@app.get("/api/jobs")
def list_jobs(request: Request, user: UserDep, session: SessionDep, dag_id: str | None = None,
              limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = DEFAULT_LIMIT) -> dict[str, Any]:
    """The newest runs' jobs of every DAG the user may read (of one DAG with ``dag_id``)."""
    readable = _readable_dag_ids(user)
    if dag_id is not None:
        _require(user, dag_id, DagAccessEntity.TASK_INSTANCE)
        readable = {dag_id} & readable
    jobs = find_jobs(session, readable, limit=limit)
    allowed = {d for d in {j.dag_id for j in jobs} if _may_read(user, d, DagAccessEntity.TASK_INSTANCE)}
    return {"user": user.get_name(), "jobs": _rows(request, [j for j in jobs if j.dag_id in allowed])}


@app.get("/api/runs/{dag_id}/{run_id}/jobs")
def run_jobs(request: Request, dag_id: str, run_id: str, user: UserDep, session: SessionDep,
             task_id: Annotated[str | None, Query(max_length=250)] = None,
             map_index: Annotated[int, Query(ge=-1)] = -1) -> dict[str, Any]:
    """The jobs of one run: 403 for a DAG the user may not read, 404 for a run without a job. With
    ``task_id`` (the task-instance tab), the job of that task is marked and first, and for one of
    its replica tasks the replica of ``map_index`` too."""
    _require(user, dag_id, DagAccessEntity.TASK_INSTANCE)
    jobs = find_jobs(session, {dag_id}, run=(dag_id, run_id))
    if not jobs:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no TF job in run {run_id!r} of {dag_id!r}")
    rows = _rows(request, jobs)
    return {"user": user.get_name(), "jobs": mark_task(rows, task_id, map_index) if task_id else rows}


@app.get("/api/runs/{dag_id}/{run_id}/jobs/{job}/logs/{replica}", response_class=PlainTextResponse)
def archived_log(dag_id: str, run_id: str, job: str, replica: str, user: UserDep, session: SessionDep) -> Response:
    """One replica's log file, as text: the file teardown reported for that replica, else the one its
    replica task streams into the job's log directory (the record's, never a path from a request)."""
    _require(user, dag_id, DagAccessEntity.TASK_LOGS)
    src = next((j for j in find_jobs(session, {dag_id}, run=(dag_id, run_id), list_pods=False)
                if j.record.job == job), None)
    if src is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no TF job {job!r} in run {run_id!r} of {dag_id!r}")
    root = log_roots(src).get(replica)
    if root is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND,
                            f"the log of {replica!r} of {job!r} is neither archived nor streamed")
    pod = src.record.replica_by_key(replica).pod
    try:
        log = read_archived_log(root, job, pod)
    except FileNotFoundError:
        raise HTTPException(status.HTTP_404_NOT_FOUND,
                            f"no log file of {replica!r} (gone, or not written yet)") from None
    except (DataError, NotADirectoryError, PermissionError) as exc:
        raise HTTPException(status.HTTP_403_FORBIDDEN, f"refused: {exc}") from None
    return PlainTextResponse(log.text, headers={**LOG_HEADERS, "X-Archive-Size": str(log.size),
                                                "X-Archive-Truncated": str(log.truncated).lower()})

