"""What every operator and sensor of the package does the same way.

Why: the one rule "a :class:`~tfk8s_airflow.exceptions.PermanentError` fails the task at
once, without retries; anything else is left to Airflow's retries" is written here once, and so
is the one rule of ``trigger_queue`` (:func:`check_trigger_queue`, :func:`on_trigger_queue`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from airflow.sdk.exceptions import AirflowFailException

from tfk8s_airflow import features
from tfk8s_airflow.exceptions import PermanentError, SpecError

#: ``[triggerer] queues_enabled``: Airflow (3.2+) gives a deferred task's trigger its task's queue only with it.
QUEUES_ENABLED = ("triggerer", "queues_enabled")


def describe(exc: BaseException) -> str:
    """``SpecError: ...``: the message a failed task shows, naming the error class."""
    return f"{type(exc).__name__}: {exc}"


@contextmanager
def fail_permanently() -> Iterator[None]:
    """Turn a PermanentError raised inside into ``AirflowFailException`` (no retry)."""
    try:
        yield
    except PermanentError as exc:
        raise AirflowFailException(describe(exc)) from exc


def partition_key(path: str) -> str:
    """``/data/clicks/dt=2026-01-01`` -> ``dt=2026-01-01``: the last ``key=value`` segments of a path,
    else the path itself (the partition an Asset event is about)."""
    parts = [p for p in str(path).rstrip("/").split("/") if p]
    tail = [p for p in parts if re.fullmatch(r"[\w.-]+=[^/]+", p)]
    return "/".join(tail[-3:]) if tail else str(path)


def describe_outlets(context: Mapping[str, Any], outlets: Iterable[Any], extra: Mapping[str, Any],
                     partition: str | None = None) -> None:
    """Attach ``extra`` (and the partition key) to the events Airflow emits for the task's Asset outlets.

    The partition key goes on the event itself from Airflow 3.3 (:data:`features.ASSET_PARTITIONS`);
    before, the event's ``extra`` (which callers give the key too) is all it carries."""
    from airflow.sdk import Asset

    partitions = features.has(features.ASSET_PARTITIONS)

    events = context.get("outlet_events")
    if events is None:
        return
    for outlet in outlets:
        if isinstance(outlet, Asset):
            accessor = events[outlet]
            accessor.extra.update(dict(extra))
            if partition and partitions:
                accessor.add_partitions(partition[:250])


def check_trigger_queue(trigger_queue: Any, field: str = "trigger_queue") -> str | None:
    """A ``trigger_queue`` argument as given (None for none); SpecError, when the DAG is parsed, for one that
    is not a non-empty string."""
    if trigger_queue is None:
        return None
    if not isinstance(trigger_queue, str) or not trigger_queue.strip() or len(trigger_queue) > 256:
        raise SpecError(f"must be a queue name (a non-empty string of at most 256 characters, the name a "
                        f"triggerer consumes with `airflow triggerer --queues NAME`), got {trigger_queue!r}",
                        field=field)
    return trigger_queue


def on_trigger_queue(task: Any) -> None:
    """Just before ``task.defer(...)``: put the trigger on the task's ``trigger_queue``, if it has one.

    Airflow (3.2+, with ``[triggerer] queues_enabled``) gives a trigger the ``queue`` its task has when it
    defers, and a triggerer started with ``--queues NAME`` runs only the triggers of those queues. The
    task's queue is set to ``trigger_queue`` for that moment only: where its worker part ran (the executor's
    queue, the DAG's ``queue=``) is decided by then. Without ``queues_enabled`` Airflow gives the trigger no
    queue, and the task log says so (any triggerer without ``--queues`` runs it)."""
    queue = getattr(task, "trigger_queue", None)
    if not queue:
        return
    from airflow.sdk.configuration import conf

    if not conf.getboolean(*QUEUES_ENABLED, fallback=False):
        task.log.warning("trigger_queue %r is not applied: [triggerer] queues_enabled is off in this deployment, "
                         "so Airflow gives the trigger no queue and any triggerer without --queues runs it "
                         "(fix: set [triggerer] queues_enabled = True)", queue)
        return
    task.log.info("trigger on queue %r (a triggerer started with --queues %s runs it)", queue, queue)
    task.queue = queue
