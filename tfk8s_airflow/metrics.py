"""Emits the package's metrics (:mod:`tfk8s_airflow.metricnames`) through Airflow's own metrics backend.

The backend is the one Airflow's ``[metrics]`` section configures (``statsd_on``, ``statsd_datadog_enabled``
or ``otel_on``, with their hosts, prefixes, allow and block lists), made by the task SDK's own factory
(``airflow.sdk.observability.metrics.stats_utils.get_stats_factory``), once per process: the same in a
worker's task, in the triggerer's trigger runner and under ``dag.test()``, whether or not Airflow set up its
own module-level ``Stats`` in that process. Without ``[metrics]`` nothing is sent. A metric never fails a
task: a backend that cannot send is logged once and skipped.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from tfk8s_airflow.metricnames import BY_NAME, Point

__all__ = ["emit", "reset"]

log = logging.getLogger(__name__)
_backend: Any = None
_pid: int | None = None
_failed = False


def _make() -> Any:
    from airflow.sdk.observability.metrics import stats_utils

    try:
        factory = stats_utils.get_stats_factory()
    except TypeError:  # task SDK 1.2 (Airflow 3.2) takes the Stats class, for Datadog's client
        from airflow.sdk.observability.stats import Stats

        factory = stats_utils.get_stats_factory(Stats)  # type: ignore[call-arg]  # the 1.2 signature
    return factory()


def _close(backend: Any) -> None:
    """Close a backend's socket (Airflow's StatsD logger holds a ``statsd`` client): a backend dropped
    open leaves its socket to the garbage collector, which warns (ResourceWarning)."""
    close = getattr(getattr(backend, "statsd", None), "close", None)
    if callable(close):
        try:
            close()
        except OSError as exc:
            log.debug("closing the metrics backend: %s", exc)


def _get() -> Any:
    global _backend, _pid
    if _backend is None or _pid != os.getpid():
        if _backend:
            _close(_backend)  # a forked process's copy of its parent's socket
        try:
            _backend = _make()
        except Exception as exc:  # noqa: BLE001 - metrics never fail a task
            log.warning("tfk8s metrics are off: Airflow's metrics backend could not be made: %s", exc)
            _backend = False
        _pid = os.getpid()
    return _backend


def reset() -> None:
    """Forget the backend (the next point makes it again from ``[metrics]``)."""
    global _backend, _pid
    if _backend:
        _close(_backend)
    _backend, _pid = None, None


def emit(points: Iterable[Point]) -> None:
    """Send each point as its catalogue entry's kind says (a timer's seconds as a duration)."""
    global _failed
    for point in points:
        metric = BY_NAME.get(point.name)
        if metric is None:
            raise ValueError(f"metric {point.name!r} is not in tfk8s_airflow.metricnames.CATALOG")
        backend = _get()
        if not backend:
            return
        tags = dict(point.tags)
        try:
            if metric.kind == "counter":
                backend.incr(point.name, int(point.value), 1, tags=tags)
            elif metric.kind == "gauge":
                backend.gauge(point.name, float(point.value), 1, False, tags=tags)
            else:
                backend.timing(point.name, timedelta(seconds=float(point.value)), tags=tags)
        except Exception as exc:  # noqa: BLE001 - metrics never fail a task
            if not _failed:
                log.warning("sending metric %s failed: %s", point.name, exc)
                _failed = True
