"""Airflow connections turned into the configurations of our backends.

Why here: the staging engine (:mod:`tfk8s_airflow.staging`) knows no Airflow; the operators,
sensors and triggers look their connections up through Airflow (environment
``AIRFLOW_CONN_*``, secrets backends, the database) with these helpers.
"""

from __future__ import annotations

from airflow.sdk import BaseHook

from tfk8s_airflow.staging.webhdfs import WebHdfs, WebHdfsConfig


def webhdfs_config(conn_id: str = "webhdfs_default") -> WebHdfsConfig:
    """The WebHDFS connection ``conn_id`` (host, port, login, extra: see docs/staging.md)."""
    return WebHdfsConfig.from_connection(BaseHook.get_connection(conn_id))


def webhdfs(conn_id: str = "webhdfs_default") -> WebHdfs:
    """A WebHDFS client for the connection ``conn_id``."""
    return WebHdfs(webhdfs_config(conn_id))
