"""Operator extra links whose URL the task stores itself, as the XCom Airflow reads links from.

Why stored, and by whom: Airflow 3 shows an operator's extra link from an XCom of the task
instance under the link's key (``_link_<LinkClass>``). A task that ends on a worker gets it
pushed at the end (the task runner's ``finalize`` calls :meth:`StoredLink.get_link`, which
returns what the task stored in that process, without reading the XCom back: a read of an absent
XCom logs an error into the task's log). A task that starts and ends in the triggerer never runs
``finalize``: its trigger puts the link's XCom into the ``TaskSuccessEvent`` /
``TaskFailedEvent`` itself (:func:`link_xcom`), and may push it while the task still waits,
so the link works during the run. The api-server then shows the stored value and never
computes a link itself.

A link's value is whatever the task stored: the trigger decides it from the deployment's
settings and the job's records, never from a value a pod or a form could plant.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import urlsplit

from airflow.sdk import BaseOperatorLink

from tfk8s_airflow.exceptions import AirflowFeatureMissingError
from tfk8s_airflow.job.policy.tensorboard_url import http_url
from tfk8s_airflow.viewpaths import PREFIX, replica_log_path

if TYPE_CHECKING:
    from airflow.sdk.types import TaskInstanceKey

__all__ = ["StoredLink", "TensorBoardLink", "ReplicaLogLink", "replica_log_url", "link_xcom", "store_link",
           "astore_link", "axcom_push"]


class StoredLink(BaseOperatorLink):
    """An extra link whose URL the task stored under the link's own XCom key."""

    name: ClassVar[str] = ""  # each link's button text (the base declares an abstract property)

    @classmethod
    def key(cls) -> str:
        """The link's XCom key, as Airflow derives it (``_link_<class name>``)."""
        return f"_link_{cls.__name__}"

    @classmethod
    def accept(cls, url: Any) -> str | None:
        """The URL when this link may point there, else None (nothing is stored)."""
        return url if isinstance(url, str) and url else None

    def get_link(self, operator: Any, *, ti_key: TaskInstanceKey) -> str:
        """What this process stored for the task instance (:func:`store_link`), else "".

        Never a read of the XCom: the task runner's ``finalize`` calls this for every extra link
        of every task that ran on a worker, also when it deferred or stored no link, and a read of
        an absent XCom logs ``[error] XCom not found`` into the task's log. Every value a worker
        may keep passes through :func:`store_link` in the process that then finalizes.
        """
        return self.accept(_STORED.get(_stored_key(ti_key, self.key()))) or ""


class TensorBoardLink(StoredLink):
    """**TensorBoard** on the job sensor: the job's TensorBoard (an absolute http(s) URL only)."""

    name = "TensorBoard"

    @classmethod
    def accept(cls, url: Any) -> str | None:
        return http_url(url)


class ReplicaLogLink(StoredLink):
    """**Replica log** on a replica task: its replica's whole log file, served by the TF jobs view
    (a path of this Airflow's own origin only, under the view's routes)."""

    name = "Replica log"

    @classmethod
    def accept(cls, url: Any) -> str | None:
        if not isinstance(url, str) or not url.startswith("/") or url.startswith("//"):
            return None
        parts = urlsplit(url)
        if parts.scheme or parts.netloc or f"{PREFIX}/api/runs/" not in parts.path:
            return None
        return url


def replica_log_url(dag_id: str, run_id: str, job: str, replica: str) -> str:
    """The TF jobs view's route for one replica's log file, under the api-server's base path."""
    from airflow.configuration import conf

    base = urlsplit(conf.get("api", "base_url", fallback="/") or "/").path or "/"
    return replica_log_path(base.rstrip("/") + PREFIX, dag_id, run_id, job, replica)


def link_xcom(link: type[StoredLink], url: Any) -> dict[str, str]:
    """``{xcom key: url}`` for a trigger event's ``xcoms``; empty when the link may not point there."""
    accepted = link.accept(url)
    return {link.key(): accepted} if accepted else {}


#: The links this process stored, by task instance and key: what :meth:`StoredLink.get_link` returns.
_STORED: dict[tuple[str, str, str, int, str], str] = {}


def _stored_key(ti: Any, key: str) -> tuple[str, str, str, int, str]:
    map_index = getattr(ti, "map_index", None)
    return (ti.dag_id, ti.task_id, ti.run_id, -1 if map_index is None else map_index, key)


def store_link(ti: Any, link: type[StoredLink], url: Any) -> bool:
    """Push the link's XCom from a running task (``ti``: its task instance); False when not stored."""
    for key, value in link_xcom(link, url).items():
        ti.xcom_push(key=key, value=value)
        _STORED[_stored_key(ti, key)] = value
        return True
    return False


async def axcom_push(ti: Any, key: str, value: Any) -> None:
    """Push an XCom of a trigger's task instance from the triggerer, through ``XCom.aset``.

    The task instance's own ``xcom_push`` / ``axcom_push`` fail in the triggerer: they read
    ``returns_dag_result`` from the task, which the triggerer's deserialized task lacks (Airflow 3.3).
    Airflow 3.2 has no ``XCom.aset``: :class:`~tfk8s_airflow.exceptions.AirflowFeatureMissingError`.
    """
    from airflow.sdk.execution_time.xcom import XCom

    if not hasattr(XCom, "aset"):  # Airflow 3.2: the caller logs this once and the task's end stores it
        from tfk8s_airflow.features import xcom_from_triggerer_note

        raise AirflowFeatureMissingError(xcom_from_triggerer_note())
    await XCom.aset(key=key, value=value, dag_id=ti.dag_id, task_id=ti.task_id, run_id=ti.run_id,
                    map_index=ti.map_index if ti.map_index is not None else -1)


async def astore_link(ti: Any, link: type[StoredLink], url: Any) -> bool:
    """:func:`store_link` from a trigger (:func:`axcom_push`)."""
    for key, value in link_xcom(link, url).items():
        await axcom_push(ti, key, value)
        return True
    return False
